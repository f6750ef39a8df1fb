"""One image, as recipes/targets/<name>.yaml describes it (with what it extends), resolved
against versions.yaml, deepspeed-ops.yaml and its sites: typed and frozen, ready for the
building blocks."""

from dataclasses import dataclass
from functools import cached_property

from .section import Section
from .target_parts import CudaToolkit, DeepSpeed, Stage, Versions

FLAVOUR_VENDOR = {"cuda": "nvidia", "rocm": "amd"}
FLAVOUR_COMM = {"cpu": "gloo", "cuda": "nccl", "rocm": "rccl"}
# The image's own libfabric with the CXI (Slingshot) provider, in build order; each a source
# in versions.yaml
CXI_STACK = ("cassini-headers", "cxi-driver", "libcxi", "libfabric")
BUILD_TOOLS = ("setuptools", "wheel", "ninja")  # DeepSpeed builds with --no-build-isolation


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    sites: tuple  # (Site, ...)
    stages: tuple  # (Stage build, Stage final)
    os_family: str
    os_components: tuple  # Debian archive areas apt uses, ("main",) unless the recipe says
    packages_build: tuple
    packages_final: tuple
    venv: str
    build_tools: tuple  # (("setuptools", "80.9.0"), ...) pip needs to build wheels
    python_packages: tuple  # (("numpy", "2.4.6"), ...) the target's extras
    frameworks: tuple  # (("lightning", "2.6.6"), ...) or () when the recipe says no
    torch_flavour: str  # cpu | cuda | rocm
    torch_version: str
    torch_index: str  # extra index URL, or "" for the default index
    cuda_min_driver: tuple  # (("12", "525.60.13"), ...) CUDA images only
    cuda_toolkit: object  # CudaToolkit or None
    deepspeed: DeepSpeed
    comm_library: str  # gloo | nccl | rccl
    plugin: object  # Source or None
    libfabric: tuple  # (Source, ...) of the image's own libfabric with CXI, or ()
    mpi_abi: str
    mpi4py_version: str  # "" when mpi4py is not wanted
    build_space: tuple = ()  # (("devel", GB), ("base", GB), ("image", GB)) or ()

    @classmethod
    def from_yaml(cls, name: str, spec: Section, sites: tuple, versions: Versions, ops):
        """``spec``: the recipe merged with what it extends; ``sites``: the Sites it names."""
        flavour = spec["torch"]["flavour"]
        _check_sites(spec, flavour, sites)
        plugin, libfabric = _comm(name, spec, flavour, sites, versions)
        python, mpi, os_spec = spec.part("python"), spec.part("mpi"), spec.part("os")
        archs = _archs(sites)
        stages = tuple(
            Stage.from_yaml(stage, spec.part("stages").part(stage), versions) for stage in ("build", "final")
        )
        extras = tuple(
            (package, versions.pin(spec, ("python", "packages", index), package))
            for index, package in enumerate(python.get("packages", []))
        )
        tools = tuple((tool, versions.pin(spec, ("python",), tool)) for tool in BUILD_TOOLS)
        deepspeed = DeepSpeed.from_yaml(
            spec.part("deepspeed"), flavour, archs, ops, versions.pin(spec, ("deepspeed",), "deepspeed")
        )
        mpi4py = versions.pin(spec, ("mpi", "mpi4py"), "mpi4py") if mpi.get("mpi4py", True) else ""
        # a target may pin its own torch: the release whose wheels carry its GPUs' archs
        torch_version = str(
            spec["torch"].get("version")
            or versions.get("torch_by_flavour", {}).get(flavour)
            or versions.pin(spec, ("torch",), "torch")
        )
        toolkit = CudaToolkit.from_yaml(spec, flavour)
        components = tuple(os_spec.get("components", ("main",)))
        if components != ("main",) and os_spec["family"] != "debian":
            raise os_spec.error(
                ("components",), f"archive areas are a Debian setting; expected none for {os_spec['family']}"
            )
        frameworks = python.get("frameworks", flavour != "cpu")  # GPU images have them unless they say no
        return cls(
            name=name,
            description=spec["description"],
            sites=sites,
            stages=stages,
            os_family=os_spec["family"],
            os_components=components,
            packages_build=tuple(os_spec.get("packages", {}).get("build", ())),
            packages_final=tuple(os_spec.get("packages", {}).get("final", ())),
            venv=python.get("venv", "/opt/venv"),
            build_tools=tools,
            python_packages=extras,
            frameworks=tuple((n, str(v)) for n, v in versions["frameworks"].items()) if frameworks else (),
            torch_flavour=flavour,
            torch_version=torch_version,
            torch_index=versions["torch_index"].get(flavour, ""),
            cuda_min_driver=tuple(sorted(versions.get("cuda_min_driver", {}).items())) if flavour == "cuda" else (),
            cuda_toolkit=toolkit,
            deepspeed=deepspeed,
            comm_library=spec["comm"]["library"],
            plugin=plugin,
            libfabric=libfabric,
            mpi_abi=mpi["abi"],
            mpi4py_version=mpi4py,
            build_space=tuple(sorted(spec.get("build_space", {}).items())),
        )

    @property
    def archs(self):
        """GPU archs of every site, in order, each once."""
        return _archs(self.sites)

    @property
    def wavefront_size(self):
        """Threads per wavefront of the image's AMD GPUs (its sites agree; from_yaml checks),
        0 for other images."""
        return max((site.gpu.wavefront_size for site in self.sites), default=0)

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
            "os": {
                "family": self.os_family,
                "packages": {"build": list(self.packages_build), "final": list(self.packages_final)},
            },
            "python": {
                "venv": self.venv,
                "build_tools": dict(self.build_tools),
                "packages": dict(self.python_packages),
                "frameworks": dict(self.frameworks),
            },
            "torch": {"flavour": self.torch_flavour, "version": self.torch_version, "index": self.torch_index},
            "deepspeed": {
                "version": ds.version,
                "accelerator": ds.accelerator,
                "switches": dict(ds.switches),
                "listed_ops": list(ds.listed),
                "promised_ops": list(ds.promised),
                "skipped_ops": dict(ds.skipped),
                "packages": list(ds.packages),
                "fix_master_address": ds.fix_master_address,
            },
            "comm": {"library": self.comm_library, "plugin": None if self.plugin is None else self.plugin.label()},
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
            resolved["cuda_toolkit"] = {"from": kit.source, "version": kit.version or None, "gcc": kit.gcc or None}
        return resolved


def _archs(sites) -> tuple:
    seen = []
    for site in sites:
        seen += [arch for arch in site.gpu.arch if arch not in seen]
    return tuple(seen)


def _check_sites(spec: Section, flavour: str, sites: tuple):
    """The image runs on each of its sites (their GPUs' vendor, their MPI, one wavefront size)
    and talks as its torch flavour does."""
    vendor = FLAVOUR_VENDOR.get(flavour)
    for index, site in enumerate(sites):
        if vendor and site.gpu.vendor != vendor:
            raise spec.error(
                ("sites", index),
                f"site {site.name!r} has {site.gpu.vendor} GPUs; a {flavour} image needs {vendor} GPUs",
            )
        if site.mpi.abi != spec["mpi"]["abi"]:
            raise spec.error(
                ("mpi", "abi"),
                f"site {site.name!r} runs {site.mpi.abi}; expected the "
                f"image's MPI to match it, found {spec['mpi']['abi']}",
            )
    wavefronts = {}
    for site in sites:
        wavefronts.setdefault(site.gpu.wavefront_size, site.name)
    if len(wavefronts) > 1:
        raise spec.error(
            ("sites",),
            f"sites {' and '.join(wavefronts.values())} have GPUs of different "
            f"wavefront sizes ({' and '.join(map(str, wavefronts))}); expected "
            f"one image per wavefront size",
        )
    if spec["comm"]["library"] != FLAVOUR_COMM[flavour]:
        raise spec.error(
            ("comm", "library"), f"a {flavour} image uses {FLAVOUR_COMM[flavour]}; found {spec['comm']['library']}"
        )


def _comm(name: str, spec: Section, flavour: str, sites: tuple, versions: Versions):
    """(plugin Source or None, the image's own libfabric sources or ()), as comm asks."""
    comm, plugin, libfabric = spec.part("comm"), None, ()
    if comm.get("plugin", "none") != "none":
        if flavour == "cpu":
            raise comm.error(("plugin",), "a network plugin needs nccl or rccl; a cpu image uses gloo")
        plugin = versions.source(name, comm["plugin"])
    if comm.get("libfabric", "distro") == "cxi":
        if plugin is None:
            raise comm.error(
                ("libfabric",),
                "libfabric: cxi is what the network plugin uses; expected a plugin (aws-ofi-nccl) beside it",
            )
        libfabric = tuple(versions.source(name, part) for part in CXI_STACK)
    for site in sites:
        if site.network.libfabric == "image" and not libfabric:
            raise comm.error(
                (),
                f"site {site.name!r} runs multi-node jobs on the image's own libfabric; expected comm.libfabric: cxi",
            )
    return plugin, libfabric
