"""The resolved, validated recipe: typed and frozen, ready for the building blocks."""

from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Partition:
    name: str
    max_nodes: int
    max_time: str                  # Slurm's D-HH:MM:SS
    max_gpus: int                  # per node
    whole_nodes: bool              # takes only jobs that use whole nodes
    test: bool                     # short tests: chosen only when named
    note: str


@dataclass(frozen=True)
class Account:
    """slurm.account: the project a job bills, as the site writes it."""
    example: str                   # project_465000000
    pattern: str                   # the form, a regular expression
    required: bool = False         # the site refuses jobs that name none


@dataclass(frozen=True)
class Qos:
    name: str
    max_time: str                  # "" when the QoS sets no time limit of its own
    max_gpus: int                  # per job; 0 when it sets no limit
    test: bool = False             # a QoS for short tests: only when asked for (--qos)


@dataclass(frozen=True)
class Site:
    """One machine, as recipes/sites/<name>.yaml describes it. Paths may start with a
    variable ($TMPDIR, $LOCAL_SCRATCH) that the wrapper looks up when it runs."""
    name: str
    description: str
    gpu_vendor: str                # nvidia | amd | none
    gpu_model: str
    archs: tuple                   # ("sm_80",), ("gfx90a",) or ()
    wavefront_size: int            # AMD GPUs: threads per wavefront (gfx90a: 64); 0 otherwise
    gpus_per_node: int
    cores_per_node: int
    cores_per_gpu: int             # 0: not said
    mem_per_gpu_gb: int            # 0: not said
    cpu_bind: str                  # srun --cpu-bind value; "" when Slurm's default is right
    runtime: str                   # apptainer | singularity
    runtime_path: str              # "" to search PATH
    runtime_module: str            # the module a job loads for the runtime ("" when installed)
    image_dir: str                 # the only folder the runtime takes images from ("" when any)
    image_copy: str                # the command that puts an image there ("" when a plain cp)
    modules_purge: bool            # job scripts start with `module purge`
    modules_load: tuple            # modules job scripts load (before the runtime's)
    requires_job: bool             # the runtime works on compute nodes only
    binds: tuple
    tmpdir: str                    # the job's temporary folder ("" when not said)
    node_local: str                # node-local disk for staged data ("" when none)
    env: tuple                     # ((name, value), ...) in file order
    multi_node_binds: tuple        # bound on jobs of more than one node only
    multi_node_env: tuple          # ((name, value), ...) set on multi-node jobs only
    multi_node_library_path: tuple  # prepended to LD_LIBRARY_PATH on multi-node jobs only
    mpi_abi: str                   # openmpi | mpich
    mpi_host: str                  # the host MPI the image's must match, for people
    mpi_host_module: str           # the module with the host's mpirun ("" when on PATH)
    slurm_mpi: str                 # srun --mpi value, "none" when srun has no MPI plugin
    launcher_default: str          # torchrun | srun | mpirun | deepspeed
    master_port_base: int
    account: Account | None        # slurm.account: the form of the project a job bills
    gpu_request: str               # gres | gpus-per-node
    gres_type: str                 # the TYPE of --gres=gpu:TYPE:N ("" for --gres=gpu:N)
    mem_rule: str                  # per_gpu | whole_node | none
    qos: tuple                     # (Qos, ...) in order of preference; () when none is asked
    constraint: str                # sbatch --constraint ("" when none)
    sbatch_extra: tuple            # sbatch options every job here carries
    partitions: tuple              # (Partition, ...) in order of preference
    network: dict                  # {"transport", "provider", "libfabric"} or {} when not said
    libfabric: str                 # image | host: whose libfabric multi-node jobs use ("" when none)
    host_libfabric_binds: tuple    # the host's libfabric stack, bound on multi-node jobs when
    host_libfabric_library_path: tuple  # libfabric is host (and then first on LD_LIBRARY_PATH)
    allreduce: tuple               # reference dicts, as the smoke suite reads them
    notes: tuple
    retired: str                   # the date its GPU nodes were shut down; "" while in service
    data: dict                     # the file as written, for `show` only

    @property
    def uses_host_libfabric(self) -> bool:
        return self.libfabric == "host"

    @property
    def multi_node_binds_in_effect(self) -> tuple:
        """What multi-node jobs bind: the site's list, plus the host's libfabric when chosen."""
        return self.multi_node_binds + (self.host_libfabric_binds if self.uses_host_libfabric else ())

    @property
    def multi_node_library_path_in_effect(self) -> tuple:
        return (self.host_libfabric_library_path if self.uses_host_libfabric else ()) \
            + self.multi_node_library_path

    @property
    def smoke_facts(self) -> dict:
        """What the smoke suite judges a run on this site against; the wrapper hands it over
        at run time, so correcting a reference rebuilds no image."""
        network = dict(self.network)
        if self.uses_host_libfabric:     # where the preflight expects the plugin's libfabric
            network["host_library_path"] = list(self.host_libfabric_library_path)
        return {"site": self.name, "network": network, "allreduce": list(self.allreduce),
                "slurm_mpi": self.slurm_mpi, "gpus_per_node": self.gpus_per_node,
                "notes": list(self.notes)}


@dataclass(frozen=True)
class Stage:
    name: str                      # build | final
    bootstrap: str                 # docker | debootstrap | localimage
    image: str                     # image reference, Debian suite, or SIF path


@dataclass(frozen=True)
class Source:
    """A source tree built inside an image, pinned by its git commit."""
    name: str
    version: str
    git: str                       # https URL of the repository
    commit: str                    # 40 hex digits: the build checks out exactly this

    def label(self) -> dict:
        return {"name": self.name, "version": self.version, "git": self.git, "commit": self.commit}


@dataclass(frozen=True)
class CudaToolkit:
    """Where the nvcc that compiles the DeepSpeed ops comes from (CUDA images only)."""
    source: str                    # pypi: cuda-toolkit[nvcc,cccl,cudart]; debian: nvidia-cuda-toolkit
    version: str                   # the PyPI release (pypi only)
    gcc: str                       # the gcc major nvcc is given (debian: the newest it accepts)


@dataclass(frozen=True)
class DeepSpeed:
    version: str
    accelerator: str               # what DS_ACCELERATOR is set to while building
    switches: tuple                # ((DS_BUILD_VAR, "0"|"1"), ...) sorted, for every listed op
    listed: tuple                  # op names ds_report lists for this accelerator
    promised: tuple                # op names prebuilt: ds_report must show exactly these [YES]
    skipped: tuple                 # ((op, reason), ...) ops the recipe turned off
    packages: tuple                # Debian packages the promised ops need to build and load
    fix_master_address: bool


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    sites: tuple                   # (Site, ...)
    stages: tuple                  # (Stage build, Stage final)
    os_family: str
    os_components: tuple           # Debian archive areas apt uses, ("main",) unless the recipe says
    packages_build: tuple
    packages_final: tuple
    venv: str
    build_tools: tuple             # (("setuptools", "80.9.0"), ...) pip needs to build wheels
    python_packages: tuple         # (("numpy", "2.4.6"), ...) the target's extras
    frameworks: tuple              # (("lightning", "2.6.6"), ...) or () when the recipe says no
    torch_flavour: str             # cpu | cuda | rocm
    torch_version: str
    torch_index: str               # extra index URL, or "" for the default index
    cuda_min_driver: tuple         # (("12", "525.60.13"), ...) CUDA images only
    cuda_toolkit: object           # CudaToolkit or None
    deepspeed: DeepSpeed
    comm_library: str              # gloo | nccl | rccl
    plugin: object                 # Source or None
    libfabric: tuple               # (Source, ...) of the image's own libfabric with CXI, or ()
    mpi_abi: str
    mpi4py_version: str            # "" when mpi4py is not wanted
    build_space: tuple = ()        # (("devel", GB), ("base", GB), ("image", GB)) or ()

    @property
    def archs(self):
        """GPU archs of every site, in order, each once."""
        seen = []
        for site in self.sites:
            seen += [arch for arch in site.archs if arch not in seen]
        return tuple(seen)

    @property
    def wavefront_size(self):
        """Threads per wavefront of the image's AMD GPUs (its sites agree; the tree checks),
        0 for other images."""
        return max((site.wavefront_size for site in self.sites), default=0)

    @property
    def common_env(self):
        """Runtime variables every site of the image agrees on (baked into the image)."""
        first, *rest = [dict(site.env) for site in self.sites]
        return tuple((k, v) for k, v in first.items() if all(env.get(k) == v for env in rest))

    def stage(self, name):
        return next(stage for stage in self.stages if stage.name == name)

    @cached_property
    def resolved(self):
        """The resolved recipe as the image's labels embed it: what the image is made of.
        Site facts that do not change the image (references, binds, notes) are left out, so
        correcting them rebuilds nothing; `show` prints them beside this."""
        ds = self.deepspeed
        resolved = {
            "target": self.name,
            "description": self.description,
            "sites": [site.name for site in self.sites],
            "gpu_archs": list(self.archs),
            "stages": {s.name: {"bootstrap": s.bootstrap, "image": s.image} for s in self.stages},
            "os": {"family": self.os_family, "packages": {
                "build": list(self.packages_build), "final": list(self.packages_final)}},
            "python": {"venv": self.venv, "build_tools": dict(self.build_tools),
                       "packages": dict(self.python_packages),
                       "frameworks": dict(self.frameworks)},
            "torch": {"flavour": self.torch_flavour, "version": self.torch_version,
                      "index": self.torch_index},
            "deepspeed": {"version": ds.version, "accelerator": ds.accelerator,
                          "switches": dict(ds.switches), "listed_ops": list(ds.listed),
                          "promised_ops": list(ds.promised), "skipped_ops": dict(ds.skipped),
                          "packages": list(ds.packages),
                          "fix_master_address": ds.fix_master_address},
            "comm": {"library": self.comm_library,
                     "plugin": None if self.plugin is None else self.plugin.label()},
            "mpi": {"abi": self.mpi_abi, "mpi4py": self.mpi4py_version or None},
            "environment": dict(self.common_env),
        }
        if self.os_components != ("main",):
            resolved["os"]["components"] = list(self.os_components)
        if self.libfabric:
            resolved["comm"]["libfabric"] = [source.label() for source in self.libfabric]
        if self.wavefront_size:
            resolved["gpu_wavefront_size"] = self.wavefront_size
        if self.cuda_toolkit:
            kit = self.cuda_toolkit
            resolved["cuda_toolkit"] = {"from": kit.source, "version": kit.version or None,
                                        "gcc": kit.gcc or None}
        return resolved
