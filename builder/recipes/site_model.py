"""One machine, as recipes/sites/<name>.yaml describes it: a frozen part per section of the
file, each field named as the file names its key, so `gpu.per_node` in YAML is
`site.gpu.per_node` in code. Each part builds itself from its section and checks what the
schema cannot. Paths may start with a variable ($TMPDIR, $LOCAL_SCRATCH) that the wrapper
looks up when it runs."""

import dataclasses
from dataclasses import dataclass

from hpcml_facts import SiteFacts

from .network_model import Allreduce, Network
from .section import Section
from .site_parts import SitePart, frozen, wrapper_reads
from .slurm_model import Slurm

VENDOR_ARCH = {"nvidia": "sm_", "amd": "gfx"}
DEFAULT_ARCH = "x86_64"  # the nodes' CPU architecture (uname -m) when a site file says none


@dataclass(frozen=True)
class Driver(SitePart):
    """The GPU kernel driver the site's nodes run, as its own page says: gpu.driver, such as
    `{version: 6.3.60300, rocm: [6.1, 7.0], source: LUMI user update 2026-01, read: 2026-12-02}`."""

    version: str  # NVIDIA's driver version, or amdgpu's
    source: str  # the page that says so
    read: str  # the date it was read
    rocm: tuple = ()  # amdgpu: (oldest, newest) ROCm user space the site says it runs; () otherwise


@dataclass(frozen=True)
class Gpu(SitePart):
    vendor: str  # nvidia | amd | none
    per_node: int
    model: str = ""
    arch: tuple = ()  # ("sm_80",), ("gfx90a",) or ()
    wavefront_size: int = 0  # AMD GPUs: threads per wavefront (gfx90a: 64); 0 otherwise
    driver: Driver = None  # None: the site's pages do not say

    @classmethod
    def from_yaml(cls, spec: Section):
        gpu = dataclasses.replace(super().from_yaml(spec), driver=_driver(spec.part("driver"), spec.get("vendor")))
        prefix = VENDOR_ARCH.get(gpu.vendor)
        for index, arch in enumerate(gpu.arch):
            if prefix is None or not arch.startswith(prefix):
                expected = f"{prefix}* archs" if prefix else "no arch for a site without GPUs"
                raise spec.error(
                    ("arch", index), f"arch {arch!r} does not fit vendor {gpu.vendor}; expected {expected}"
                )
        if prefix and not gpu.arch:
            raise spec.error((), f"missing required key 'arch' for a {gpu.vendor} GPU")
        if gpu.vendor == "amd" and not gpu.wavefront_size:
            raise spec.error(
                (),
                "missing required key 'wavefront_size' for an amd GPU; "
                "expected 64 for CDNA (gfx90a, gfx942) or 32 for RDNA",
            )
        if gpu.wavefront_size and gpu.vendor != "amd":
            raise spec.error(
                ("wavefront_size",), f"wavefront_size is an AMD setting; expected none for vendor {gpu.vendor}"
            )
        return gpu


def _driver(spec: Section, vendor: str):
    if not spec.data:
        return None
    driver = Driver.from_yaml(spec)
    if (vendor == "amd") != bool(driver.rocm):
        expected = "rocm: [oldest, newest] for an amdgpu driver" if vendor == "amd" else f"no rocm for a {vendor} GPU"
        raise spec.error(("rocm",) if driver.rocm else (), f"driver: expected {expected}")
    return driver


@dataclass(frozen=True)
class Cpu(SitePart):
    cores_per_node: int
    arch: str = DEFAULT_ARCH  # uname -m of the nodes: x86_64 | aarch64
    cores_per_gpu: int = 0  # 0: not said
    mem_per_gpu_gb: int = 0  # 0: not said
    cpu_bind: str = ""  # srun --cpu-bind value; "" when Slurm's default is right


@dataclass(frozen=True)
class Runtime(SitePart):
    command: str  # apptainer | singularity
    path: str = wrapper_reads("", "HPCML_RUNTIME_PATH", "tried after `HPCML_APPTAINER`; empty: search PATH")
    module: str = wrapper_reads(
        "",
        "HPCML_RUNTIME_MODULE",
        "named in the error when no runtime is found (`module load singularity`)",
        note="the module that provides the runtime here, named when none is found",
    )  # the module a job loads for the runtime ("" when installed)
    image_dir: str = ""  # the only folder the runtime takes images from ("" when any)
    image_copy: str = ""  # the command that puts an image there ("" when a plain cp)
    requires_job: bool = wrapper_reads(
        False, "HPCML_REQUIRES_JOB", "when `1`, the wrapper refuses to run outside a Slurm job"
    )


@dataclass(frozen=True)
class Modules(SitePart):
    purge: bool = False  # job scripts start with `module purge`
    load: tuple = ()  # modules job scripts load (before the runtime's)


@dataclass(frozen=True)
class BuildJob(SitePart):
    """site_image.build_job: the Slurm job that builds a site-image target (run/build_job.py)."""

    partition: str
    tmpdir: str  # the build's temporary folders (APPTAINER_TMPDIR) on the node
    source: str
    read: str
    cpus: int = 16
    time: str = "04:00:00"
    modules: tuple = ()  # loaded first: what puts proot on PATH


@dataclass(frozen=True)
class SiteImage(SitePart):
    """The site's own image, which site-image targets start from: site_image, such as
    `{path: /appl/local/laifs/containers/lumi-multitorch-latest.sif, module_use:
    [/appl/local/laifs/modules], module_load: [lumi-aif-singularity-bindings]}`."""

    path: str  # the image file, on the site's file system
    runtime: str = ""  # the ROCm or CUDA release its torch is built with ("7.0"); "" when not said
    venv: str = "/opt/venv"  # where its Python and torch live
    module_use: tuple = ()  # module folders a job adds (module use) ...
    module_load: tuple = ()  # ... and the modules it loads to run the image (bindings)
    origin: tuple = ()  # (file, line) of site_image.path, for the build's error when it is missing
    # ((name, SiteImage), ...): the site's other images a target may name (site_image: NAME),
    # each with its own path and runtime and the rest as this one
    others: tuple = ()
    build_job: BuildJob = None  # None where the site names none

    @classmethod
    def from_yaml(cls, spec: Section):
        if not spec.data:
            return None
        job = BuildJob.from_yaml(spec.part("build_job")) if spec.part("build_job").data else None
        image = dataclasses.replace(super().from_yaml(spec), origin=_origin(spec, ("path",)), others=(), build_job=job)
        others = spec.part("others")
        return dataclasses.replace(
            image,
            others=tuple(
                (name, dataclasses.replace(image, **others.part(name).data, origin=_origin(others, (name, "path"))))
                for name in others.data
            ),
        )

    def named(self, name):
        """The image a target's `site_image: NAME` means; None when the site has none so named."""
        return dict(self.others).get(name)


def _origin(spec: Section, path: tuple) -> tuple:
    where = spec.error(path, "")
    return (where.file, where.line)


@dataclass(frozen=True)
class Pool(SitePart):
    """Storage a job asks Slurm for, mounted on each of its nodes: scratch.pool, such as Roihu's
    `{path: /run/sbb/$USER, bb: '#BB_LUA SBF storagesize={size} path={path}', exclusive: true}`."""

    path: str  # where it is mounted; its variables expand when the job runs
    bb: str  # sbatch --bb: {size} as asked, {path} as the script's writer expands it
    exclusive: bool = False  # given only to jobs with whole nodes: the script asks --exclusive


@dataclass(frozen=True)
class Scratch(SitePart):
    tmpdir: str = ""  # the job's temporary folder ("" when not said)
    # the tmpdir is the node's memory (diskless nodes, LUMI's /tmp): what is staged there counts
    # against the job's --mem, so the wrapper's staging compares it with that too
    tmpdir_in_memory: bool = False
    node_local: str = ""  # node-local disk for staged data ("" when none)
    make_dirs: tuple = ()  # variables of env naming folders job scripts make on every node
    pool: Pool = None  # None when the site has none

    @classmethod
    def from_yaml(cls, spec: Section):
        pool = spec.part("pool")
        return dataclasses.replace(super().from_yaml(spec), pool=Pool.from_yaml(pool) if pool.data else None)


@dataclass(frozen=True)
class MultiNode(SitePart):
    """What jobs of more than one node get beside the rest."""

    binds: tuple = ()
    env: tuple = ()  # ((name, value), ...) in file order
    library_path: tuple = ()  # prepended to LD_LIBRARY_PATH
    srun_options: tuple = ()  # on every srun step of a multi-node job script


@dataclass(frozen=True)
class Mpi(SitePart):
    abi: str  # openmpi | mpich
    slurm_mpi: str  # srun --mpi value, "none" when srun has no MPI plugin
    host: str = ""  # the host MPI the image's must match, for people
    host_module: str = ""  # the module with the host's mpirun ("" when on PATH)


@dataclass(frozen=True)
class Launcher(SitePart):
    default: str = "torchrun"  # torchrun | srun | mpirun | deepspeed
    master_port_base: int = 10000


@dataclass(frozen=True)
class Site:
    name: str  # the file's name
    description: str
    gpu: Gpu
    cpu: Cpu
    runtime: Runtime
    binds: tuple
    modules: Modules
    scratch: Scratch
    env: tuple  # ((name, value), ...) in file order
    multi_node: MultiNode
    mpi: Mpi
    launcher: Launcher
    slurm: Slurm
    network: Network
    allreduce: tuple  # (Allreduce, ...)
    notes: tuple
    retired: str  # the date its GPU nodes were shut down; "" while in service
    site_image: SiteImage = None  # None when the site names no image of its own

    @classmethod
    def from_yaml(cls, name: str, spec: Section):
        gpu, network = Gpu.from_yaml(spec.part("gpu")), Network.from_yaml(spec.part("network"))
        env = frozen(spec.get("env", {}))
        for index, variable in enumerate(spec.part("scratch").get("make_dirs", ())):
            if variable not in dict(env):
                raise spec.error(
                    ("scratch", "make_dirs", index),
                    f"{variable} is not a variable of env; expected one that names a folder",
                )
        return cls(
            name=name,
            description=spec["description"],
            gpu=gpu,
            cpu=Cpu.from_yaml(spec.part("cpu")),
            runtime=Runtime.from_yaml(spec.part("runtime")),
            binds=tuple(spec["binds"]),
            modules=Modules.from_yaml(spec.part("modules")),
            scratch=Scratch.from_yaml(spec.part("scratch")),
            env=env,
            multi_node=MultiNode.from_yaml(spec.part("multi_node")),
            mpi=Mpi.from_yaml(spec.part("mpi")),
            launcher=Launcher.from_yaml(spec.part("launcher")),
            slurm=Slurm.from_yaml(spec.part("slurm"), gpu.per_node),
            network=network,
            allreduce=tuple(Allreduce(**item) for item in spec.get("allreduce", ())),
            notes=tuple(spec.get("notes", ())),
            retired=spec.get("retired", ""),
            site_image=SiteImage.from_yaml(spec.part("site_image")),
        )

    @property
    def multi_node_binds_in_effect(self) -> tuple:
        """What multi-node jobs bind: the site's list, plus the host's libfabric when chosen."""
        return self.multi_node.binds + self.network.host_binds

    @property
    def dirs_to_make(self) -> tuple:
        """((name, folder), ...): the env variables scratch.make_dirs names, with their values
        (`${NAME}` still to expand), which job scripts make on every node first."""
        return tuple((name, dict(self.env)[name]) for name in self.scratch.make_dirs)

    @property
    def multi_node_library_path_in_effect(self) -> tuple:
        return self.network.host_library_path + self.multi_node.library_path

    @property
    def smoke_facts(self) -> SiteFacts:
        """What the smoke suite judges a run on this site against; the wrapper hands it over
        at run time, so correcting a reference rebuilds no image."""
        return SiteFacts(
            site=self.name,
            network=self.network.facts(),
            allreduce=tuple(item.facts() for item in self.allreduce),
            slurm_mpi=self.mpi.slurm_mpi,
        )
