"""The sections of a target's recipe that become one part each, every field named as the file
names its key, so `torch.flavour` in YAML is `target.torch.flavour` in code. Each part builds
itself from its section (with versions.yaml's pins) and checks what the schema cannot."""

from dataclasses import dataclass

from .section import Section
from .target_parts import Versions

FLAVOUR_COMM = {"cpu": "gloo", "cuda": "nccl", "rocm": "rccl"}
# The image's own libfabric with the CXI (Slingshot) provider, in build order; each a source
# in versions.yaml
CXI_STACK = ("cassini-headers", "cxi-driver", "libcxi", "libfabric")
BUILD_TOOLS = ("setuptools", "wheel", "ninja")  # DeepSpeed builds with --no-build-isolation


@dataclass(frozen=True)
class Packages:
    """The OS packages the recipe adds to each stage: os.packages, such as `{build: [], final: [hostname]}`."""

    build: tuple = ()
    final: tuple = ()

    @classmethod
    def from_yaml(cls, spec: Section):
        return cls(tuple(spec.get("build", ())), tuple(spec.get("final", ())))


@dataclass(frozen=True)
class Os:
    """The distribution the image is built on: os, such as `{family: debian, components: [main, non-free]}`."""

    family: str = ""  # debian | ubuntu; "" for a site-image target (its base's)
    components: tuple = ("main",)  # Debian archive areas apt uses, ("main",) unless the recipe says
    packages: Packages = Packages()

    @classmethod
    def from_yaml(cls, spec: Section):
        components = tuple(spec.get("components", ("main",)))
        if components != ("main",) and spec["family"] != "debian":
            raise spec.error(("components",), f"archive areas are a Debian setting; expected none for {spec['family']}")
        return cls(spec["family"], components, Packages.from_yaml(spec.part("packages")))


@dataclass(frozen=True)
class Python:
    """The image's venv and what pip puts in it: python, such as `{venv: /opt/venv, packages: [numpy]}`."""

    venv: str  # /opt/venv unless the recipe says
    packages: tuple  # (("numpy", "2.4.6"), ...) the target's extras at their versions.yaml pins
    frameworks: tuple  # (("lightning", "2.6.6"), ...) or () when the recipe says no
    build_tools: tuple  # (("setuptools", "80.9.0"), ...) pip needs to build wheels (not a key)
    mistagged: tuple = ()  # (("name", "why"), ...) wheels whose tag pip misreads; `pip check` lets them be

    @classmethod
    def from_yaml(cls, spec: Section, flavour: str, versions: Versions, site_image=None):
        """``site_image``: the SiteImage a site-image target starts from: its venv is the image's."""
        packages = tuple(
            (package, versions.pin(spec, ("packages", index), package))
            for index, package in enumerate(spec.get("packages", []))
        )
        build_tools = tuple((tool, versions.pin(spec, (), tool)) for tool in BUILD_TOOLS)
        wanted = spec.get("frameworks", flavour != "cpu")  # GPU images have them unless they say no
        return cls(
            venv=site_image.venv if site_image else spec.get("venv", "/opt/venv"),
            packages=packages,
            frameworks=tuple((n, str(v)) for n, v in versions["frameworks"].items()) if wanted else (),
            build_tools=build_tools,
            mistagged=tuple(sorted(spec.get("mistagged", {}).items())),
        )


@dataclass(frozen=True)
class Torch:
    """The PyTorch wheel: torch, such as `{flavour: rocm, version: 2.10.0, index: rocm7.0}`."""

    flavour: str  # cpu | cuda | rocm
    version: str  # torch.version, else versions.yaml's torch pin; "" on a site image (its own)
    index: str  # the URL of versions.yaml's torch_index entry torch.index names, or "" for PyPI
    # the CUDA or ROCm release its wheels are built with ("13.0", "7.0"), which the sites'
    # drivers must run; "" for CPU torch and where the recipe does not say (not judged then)
    runtime: str = ""

    @classmethod
    def from_yaml(cls, spec: Section, versions: Versions, site_image=None):
        flavour = spec["flavour"]
        if site_image:  # the base's torch, whatever release it is; the build checks its flavour
            return cls(flavour, "", "", site_image.runtime)
        # a target may pin its own torch: the release whose wheels carry its GPUs' archs
        version = str(spec.get("version") or versions.pin(spec, (), "torch"))
        indexes = versions["torch_index"]
        name = spec.get("index")
        if name is not None and name not in indexes:
            raise spec.error(
                ("index",), f"no torch_index {name!r} in versions.yaml; expected one of: {', '.join(indexes)}"
            )
        # the flavour's own index, if versions.yaml names one (CUDA: PyPI)
        url = indexes[name] if name is not None else indexes.get(flavour, "")
        return cls(flavour, version, url, _runtime(spec, flavour, name or ""))


def _runtime(spec: Section, flavour: str, index_name: str) -> str:
    """torch.runtime, or the release a ROCm index's name says (rocm7.0: 7.0); they must agree."""
    said = spec.get("runtime", "")
    named = index_name[len("rocm") :] if flavour == "rocm" and index_name.startswith("rocm") else ""
    if said and named and said != named:
        raise spec.error(("runtime",), f"runtime {said!r} but index {index_name!r}; expected runtime {named!r}")
    if flavour == "cpu" and said:
        raise spec.error(("runtime",), "a CPU torch has no GPU runtime; expected no runtime")
    return said or named


@dataclass(frozen=True)
class Comm:
    """The collective library and its network stack: comm, such as `{library: rccl, plugin: aws-ofi-nccl}`."""

    library: str  # gloo | nccl | rccl
    plugin: object = None  # Source or None
    libfabric: tuple = ()  # (Source, ...) of the image's own libfabric with CXI (libfabric: cxi), or ()

    @classmethod
    def from_yaml(cls, target: str, spec: Section, flavour: str, sites: tuple, versions: Versions, site_image=None):
        """``target``: the target's name; ``sites``: its Sites, whose networks may need the
        image's own libfabric; ``site_image``: the base whose network stack is its own."""
        if spec["library"] != FLAVOUR_COMM[flavour]:
            raise spec.error(("library",), f"a {flavour} image uses {FLAVOUR_COMM[flavour]}; found {spec['library']}")
        if site_image:  # the base's network stack
            return cls(spec["library"])
        plugin, libfabric = None, ()
        if spec.get("plugin", "none") != "none":
            if flavour == "cpu":
                raise spec.error(("plugin",), "a network plugin needs nccl or rccl; a cpu image uses gloo")
            plugin = versions.source(target, spec["plugin"], named_at=(spec, ("plugin",)))
        if spec.get("libfabric", "distro") == "cxi":
            if plugin is None:
                raise spec.error(
                    ("libfabric",),
                    "libfabric: cxi is what the network plugin uses; expected a plugin (aws-ofi-nccl) beside it",
                )
            libfabric = tuple(versions.source(target, part) for part in CXI_STACK)
        for site in sites:
            if site.network.libfabric == "image" and not libfabric:
                raise spec.error(
                    (),
                    f"site {site.name!r} runs multi-node jobs on the image's own libfabric; "
                    f"expected comm.libfabric: cxi",
                )
        return cls(spec["library"], plugin, libfabric)


@dataclass(frozen=True)
class Mpi:
    """The image's MPI and mpi4py: mpi, such as `{abi: mpich, mpi4py: true}` (mpi4py at its pin)."""

    abi: str  # openmpi | mpich, as every site's
    mpi4py: str  # the pinned version, "" when mpi4py is not wanted
    source: object = None  # Source of an MPICH built on the image's libfabric, or None: the distribution's

    @classmethod
    def from_yaml(cls, target: str, spec: Section, versions: Versions, comm: Comm, site_image=None):
        """``comm``: the target's Comm, whose own libfabric an MPI built from source runs on."""
        if site_image:  # the base's MPI and mpi4py, if it has one: nothing is installed
            return cls(spec["abi"], "")
        mpi4py = versions.pin(spec, ("mpi4py",), "mpi4py") if spec.get("mpi4py", True) else ""
        source = None
        if "source" in spec:
            if spec["abi"] != "mpich" or not comm.libfabric:
                raise spec.error(
                    ("source",),
                    "an MPI from source is MPICH on the image's own libfabric; "
                    "expected abi: mpich and comm.libfabric: cxi",
                )
            source = versions.source(target, spec["source"], named_at=(spec, ("source",)))
        return cls(spec["abi"], mpi4py, source)
