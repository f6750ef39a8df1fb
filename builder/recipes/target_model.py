"""One image, as recipes/targets/<name>.yaml describes it (with what it extends), resolved
against versions.yaml, deepspeed-ops.yaml and its sites: typed and frozen, ready for the
building blocks. Like a site, a part per section of the file (target_sections), each field
named as the file names its key: `torch.flavour` in YAML is `target.torch.flavour` in code."""

from dataclasses import dataclass
from functools import cached_property

from ..host.debian_resolve import DEBIAN_ARCH
from .section import Section
from .site_model import DEFAULT_ARCH
from .target_parts import CudaToolkit, DeepSpeed, Stage, Versions
from .target_sections import Comm, Mpi, Os, Python, Torch

FLAVOUR_VENDOR = {"cuda": "nvidia", "rocm": "amd"}
# uname -m's name -> Debian's (debootstrap --arch, dpkg --print-architecture)


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    sites: tuple  # (Site, ...)
    stages: tuple  # (Stage build, Stage final)
    os: Os
    python: Python
    torch: Torch
    cuda_min_driver: tuple  # (("12", "525.60.13"), ...) from versions.yaml, CUDA images only
    cuda_toolkit: object  # CudaToolkit or None
    deepspeed: DeepSpeed
    comm: Comm
    mpi: Mpi
    build_space: tuple = ()  # (("devel", GB), ("base", GB), ("image", GB)) or ()
    site_image: object = None  # the first site's SiteImage when the recipe says site_image: true
    arch: str = DEFAULT_ARCH  # the CPU architecture, as uname -m names it: x86_64 | aarch64
    # recipes/locks/<name>/python.txt read (builder.lockfile), None without one; what pip
    # installs (render/pip_install.py). Not in `resolved`: the definitions carry the pins.
    python_lock: object = None
    # recipes/locks/<name>/debian-<stage>.txt read (builder.lockfile.DebianLock), by stage
    debian_locks: tuple = ()
    # ROCm images only, from versions.yaml: AMD's matrix ((amdgpu release, (ROCm, ...)), ...)
    # and ((module version, amdgpu release), ...), which preflight reads the node's driver by
    amdgpu_runs: tuple = ()
    amdgpu_modules: tuple = ()

    @classmethod
    def from_yaml(cls, name: str, spec: Section, sites: tuple, versions: Versions, ops):
        """``spec``: the recipe merged with what it extends; ``sites``: the Sites it names."""
        flavour = spec["torch"]["flavour"]
        arch = spec.get("arch", DEFAULT_ARCH)
        _check_sites(spec, flavour, sites, arch)
        site_image = _site_image(spec, sites)
        comm = Comm.from_yaml(name, spec.part("comm"), flavour, sites, versions, site_image)
        if site_image:  # both stages start from it: the ops compile in it, the image is it plus ours
            stages = tuple(Stage(stage, "localimage", site_image.path) for stage in ("build", "final"))
        else:
            stages = tuple(
                Stage.from_yaml(stage, spec.part("stages").part(stage), versions) for stage in ("build", "final")
            )
        python = Python.from_yaml(spec.part("python"), flavour, versions, site_image)
        deepspeed = DeepSpeed.from_yaml(
            spec.part("deepspeed"), flavour, _archs(sites), ops, versions.pin(spec, ("deepspeed",), "deepspeed")
        )
        mpi = Mpi.from_yaml(name, spec.part("mpi"), versions, comm, site_image)
        torch = Torch.from_yaml(spec.part("torch"), versions, site_image)
        toolkit = None if site_image else CudaToolkit.from_yaml(spec, flavour)
        return cls(
            name=name,
            description=spec["description"],
            sites=sites,
            stages=stages,
            os=Os() if site_image else Os.from_yaml(spec.part("os")),
            python=python,
            torch=torch,
            cuda_min_driver=tuple(sorted(versions.get("cuda_min_driver", {}).items())) if flavour == "cuda" else (),
            cuda_toolkit=toolkit,
            deepspeed=deepspeed,
            comm=comm,
            mpi=mpi,
            build_space=tuple(sorted(spec.get("build_space", {}).items())),
            site_image=site_image,
            arch=arch,
            **(_amdgpu(versions) if flavour == "rocm" else {}),
        )

    @property
    def archs(self):
        """GPU archs of every site, in order, each once."""
        return _archs(self.sites)

    @property
    def debian_arch(self) -> str:
        return DEBIAN_ARCH[self.arch]

    @property
    def debootstraps_itself(self) -> bool:
        """Whether its debootstrap stages run debootstrap --arch themselves: Apptainer's own
        debootstrap bootstrap always makes a root of the host's architecture, right for
        x86_64 images on the x86_64 hosts they are built on."""
        return self.arch != DEFAULT_ARCH

    def stages_of_host_arch(self) -> tuple:
        """The stages whose root Apptainer makes for the build host's architecture, whatever
        the image's: pulled from a registry, or Apptainer's debootstrap."""
        return tuple(
            stage
            for stage in self.stages
            if stage.bootstrap == "docker" or (stage.bootstrap == "debootstrap" and not self.debootstraps_itself)
        )

    @property
    def multiarch_lib_dir(self) -> str:
        """Where Debian and Ubuntu put the architecture's shared libraries."""
        return f"/usr/lib/{self.arch}-linux-gnu"

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
        ds, comm = self.deepspeed, self.comm
        resolved = {
            "target": self.name,
            "description": self.description,
            "sites": [site.name for site in self.sites],
            "arch": self.arch,
            "gpu_archs": list(self.archs),
            "stages": {s.name: {"bootstrap": s.bootstrap, "image": s.image} for s in self.stages},
            "os": {
                "family": self.os.family,
                "packages": {"build": list(self.os.packages.build), "final": list(self.os.packages.final)},
            },
            "python": {
                "venv": self.python.venv,
                "build_tools": dict(self.python.build_tools),
                "packages": dict(self.python.packages),
                "frameworks": dict(self.python.frameworks),
                # only where a recipe names some: the other images' labels stay as they were
                **({"mistagged": dict(self.python.mistagged)} if self.python.mistagged else {}),
            },
            "torch": {"flavour": self.torch.flavour, "version": self.torch.version, "index": self.torch.index},
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
            "comm": {"library": comm.library, "plugin": None if comm.plugin is None else comm.plugin.label()},
            "mpi": {"abi": self.mpi.abi, "mpi4py": self.mpi.mpi4py or None},
            "environment": dict(self.common_env),
        }
        if self.site_image:  # its OS and torch are the image's, read when it is built
            del resolved["os"]
            resolved["torch"].update(version=None, index=None)
            resolved["site_image"] = {"path": self.site_image.path, "venv": self.site_image.venv}
        if self.os.components != ("main",):
            resolved["os"]["components"] = list(self.os.components)
        if comm.libfabric:
            resolved["comm"]["libfabric"] = [source.label() for source in comm.libfabric]
        if self.mpi.source:
            resolved["mpi"]["source"] = self.mpi.source.label()
        if self.wavefront_size:
            resolved["gpu_wavefront_size"] = self.wavefront_size
        if self.cuda_toolkit:
            kit = self.cuda_toolkit
            resolved["cuda_toolkit"] = {"from": kit.source, "version": kit.version or None, "gcc": kit.gcc or None}
        return resolved


# What a site-image recipe may not say, because the site's image holds it: {key path: why}
_FROM_SITE_IMAGE = {
    **{(key,): "starts from the site's image" for key in ("stages", "os", "cuda_toolkit", "build_space")},
    **{("torch", key): "uses the site image's torch" for key in ("version", "index")},
    **{("comm", key): "uses the site image's network stack" for key in ("plugin", "libfabric")},
    **{("python", key): "uses the site image's venv and packages" for key in ("venv", "packages")},
    ("mpi", "source"): "uses the site image's MPI",
}


def _site_image(spec: Section, sites: tuple):
    """The first site's SiteImage for a recipe that says site_image: true, else None; one line
    when the recipe also says what the site's image is made of, or says neither."""
    if not spec.get("site_image"):
        for key in ("stages", "os"):
            if key not in spec:
                raise spec.error((), f"missing required key {key!r} (or site_image: true)")
        return None
    for path, why in _FROM_SITE_IMAGE.items():
        *section, key = path
        if key in (spec.part(section[0]) if section else spec):
            raise spec.error(path, f"a site-image target {why}; expected no {key}")
    if spec.part("mpi").get("mpi4py"):
        raise spec.error(("mpi", "mpi4py"), "a site-image target installs no mpi4py; expected mpi4py: false")
    image = sites[0].site_image
    if image is None:
        raise spec.error(
            ("site_image",),
            f"site {sites[0].name!r} names no image of its own; expected a site_image section in its file",
        )
    chosen = spec["site_image"]
    if chosen is True:
        return image
    named = image.named(chosen)
    if named is None:
        others = ", ".join(name for name, _ in image.others) or "none"
        raise spec.error(
            ("site_image",),
            f"site {sites[0].name!r} has no image named {chosen!r}; expected true or one of "
            f"its site_image.others: {others}",
        )
    return named


def _amdgpu(versions: Versions) -> dict:
    runs = versions.get("amdgpu_runs", {})
    return {
        "amdgpu_runs": tuple((release, tuple(rocm)) for release, rocm in runs.items()),
        "amdgpu_modules": tuple(versions.get("amdgpu_modules", {}).items()),
    }


def _archs(sites) -> tuple:
    seen = []
    for site in sites:
        seen += [arch for arch in site.gpu.arch if arch not in seen]
    return tuple(seen)


def _check_sites(spec: Section, flavour: str, sites: tuple, arch: str):
    """The image runs on each of its sites (their nodes' CPU architecture, their GPUs' vendor,
    their MPI, one wavefront size); Comm checks that it talks as its torch flavour does."""
    vendor = FLAVOUR_VENDOR.get(flavour)
    for index, site in enumerate(sites):
        if site.cpu.arch != arch:
            raise spec.error(
                ("arch",) if "arch" in spec else ("sites", index),
                f"site {site.name!r} has {site.cpu.arch} nodes and the image is {arch} (it would "
                f"run emulated there); expected arch: {site.cpu.arch} or a site of {arch} nodes",
            )
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
