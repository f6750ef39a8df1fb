"""The parts of a target that versions.yaml and deepspeed-ops.yaml fill in: its stages, pinned
sources, CUDA toolkit and DeepSpeed ops, each built from its section of the target's recipe."""

from dataclasses import dataclass

from .section import Section


class Versions:
    """versions.yaml, looked up by a target's parts; a missing pin is the target's error."""

    def __init__(self, doc):
        self.doc = doc
        self.file = doc.file

    def __getitem__(self, key):
        return self.doc.data[key]

    def get(self, key, default=None):
        return self.doc.data.get(key, default)

    def pin(self, spec: Section, where: tuple, package: str) -> str:
        pins = self["python_packages"]
        if package not in pins:
            raise spec.error(
                where, f"no pinned version for {package!r}; expected an entry under python_packages in {self.file}"
            )
        return str(pins[package])

    def source(self, target: str, name: str, named_at=None) -> "Source":
        """``named_at``: (Section, key path) where the recipe names ``name``, which is then
        the place of the error when versions.yaml has no such source."""
        source = self["sources"].get(name)
        if source is None and named_at:
            spec, where = named_at
            raise spec.error(
                where,
                f"unknown source {name!r}; expected one of the sources in "
                f"{self.file}: {', '.join(sorted(self['sources']))}",
            )
        if source is None:
            raise self.doc.error(("sources",), f"missing source '{name}' that target {target!r} uses")
        submodules = tuple(sorted(source.get("submodules", {}).items()))
        return Source(name, str(source["version"]), source["git"], source["commit"], submodules)


@dataclass(frozen=True)
class Stage:
    name: str  # build | final
    bootstrap: str  # docker | debootstrap | localimage
    image: str  # image reference, Debian suite, or SIF path

    @classmethod
    def from_yaml(cls, name: str, spec: Section, versions: Versions):
        """``spec``: stages.<name>; its image is a key of versions.yaml's images unless local."""
        image = spec["image"]
        if spec["bootstrap"] != "localimage":
            images = versions["images"]
            if image not in images:
                raise spec.error(
                    ("image",),
                    f"unknown image {image!r}; expected one of the images "
                    f"in {versions.file}: {', '.join(sorted(images))}",
                )
            image = images[image]
        return cls(name, spec["bootstrap"], image)


@dataclass(frozen=True)
class Source:
    """A source tree built inside an image, pinned by its git commit."""

    name: str
    version: str
    git: str  # https URL of the repository
    commit: str  # 40 hex digits: the build checks out exactly this
    submodules: tuple = ()  # ((path, https URL), ...): at the commits this commit records

    def label(self) -> dict:
        label = {"name": self.name, "version": self.version, "git": self.git, "commit": self.commit}
        if self.submodules:
            label["submodules"] = dict(self.submodules)
        return label

    @property
    def project(self) -> str:
        """The repository's name: aws-ofi-nccl for the sources aws-ofi-nccl and aws-ofi-nccl-1.18."""
        return repository_name(self.git)


def repository_name(git_url: str) -> str:
    """https://github.com/aws/aws-ofi-nccl.git -> aws-ofi-nccl."""
    return git_url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")


@dataclass(frozen=True)
class CudaToolkit:
    """Where the nvcc that compiles the DeepSpeed ops comes from (CUDA images only)."""

    source: str  # pypi: cuda-toolkit[nvcc,cccl,cudart]; debian: nvidia-cuda-toolkit
    version: str  # the PyPI release (pypi only)
    gcc: str  # the gcc major nvcc is given (debian: the newest it accepts)

    @classmethod
    def from_yaml(cls, target: Section, flavour: str):
        """``target``: the whole recipe (a Debian toolkit needs os.components); None but for cuda."""
        spec = target.get("cuda_toolkit")
        if flavour != "cuda":
            if spec:
                raise target.error(
                    ("cuda_toolkit",),
                    f"a {flavour} image has no CUDA toolkit; expected cuda_toolkit only with torch flavour cuda",
                )
            return None
        if not spec:
            raise target.error(
                ("torch",),
                "a cuda image needs cuda_toolkit (from: pypi with its version, or from: debian) for the DeepSpeed ops",
            )
        if spec["from"] == "pypi" and not spec.get("version"):
            raise target.error(
                ("cuda_toolkit",), "missing version; expected the cuda-toolkit release torch pins, such as 13.0.3"
            )
        if spec["from"] == "debian" and "non-free" not in target["os"].get("components", ()):
            raise target.error(
                ("os",), "Debian's nvidia-cuda-toolkit is in non-free; expected os.components to include non-free"
            )
        return cls(spec["from"], spec.get("version", ""), spec.get("gcc", ""))


@dataclass(frozen=True)
class DeepSpeed:
    version: str
    accelerator: str  # what DS_ACCELERATOR is set to while building
    switches: tuple  # ((DS_BUILD_VAR, "0"|"1"), ...) sorted, for every listed op
    listed: tuple  # op names ds_report lists for this accelerator
    promised: tuple  # op names prebuilt: ds_report must show exactly these [YES]
    skipped: tuple  # ((op, reason), ...) ops the recipe turned off
    packages: tuple  # Debian packages the promised ops need to build and load
    fix_master_address: bool
    # DS_BUILD_* of promised ops compiled from another promised op's sources: built after the
    # parallel pass, one at a time (deepspeed-ops.yaml's shares_sources_with)
    compiled_later: tuple = ()

    @classmethod
    def from_yaml(cls, spec: Section, flavour: str, archs: tuple, ops, version: str):
        """Every op DeepSpeed has for the image's accelerator is prebuilt, unless skipped with a
        reason. ``spec``: deepspeed; ``ops``: deepspeed-ops.yaml."""
        table = ops.data["ops"]
        wanted_accel = "cpu" if flavour == "cpu" else "cuda"
        if spec["accelerator"] != wanted_accel:
            raise spec.error(
                ("accelerator",),
                f"a {flavour} image builds DeepSpeed ops for accelerator {wanted_accel}; found {spec['accelerator']}",
            )
        # ROCm torch runs DeepSpeed's cuda accelerator: ds_report lists the cuda ops there too
        listed_for = {"cpu"} if flavour == "cpu" else {"cuda", "rocm"}
        listed = sorted(op for op, facts in table.items() if listed_for & set(facts["accelerators"]))
        buildable = [op for op in listed if flavour in table[op]["accelerators"] and not table[op].get("placeholder")]
        skip = spec.get("skip", {})
        for op in skip:
            if op not in buildable:
                why = (
                    "is not a DeepSpeed op"
                    if op not in table
                    else "is a placeholder that is never prebuilt"
                    if table[op].get("placeholder")
                    else f"is not built for {flavour} images anyway"
                )
                raise spec.error(
                    ("skip", op),
                    f"{op!r} {why}; expected one of the ops in {ops.file} "
                    f"a {flavour} image prebuilds: "
                    f"{', '.join(o for o in buildable if o not in skip)}",
                )
        promised = [op for op in buildable if op not in skip]
        sms = [int(arch[3:]) for arch in archs if arch.startswith("sm_")]
        for op in promised:
            if sms and "min_sm" in table[op] and min(sms) < table[op]["min_sm"]:
                raise spec.error(
                    (),
                    f"op {op!r} needs sm_{table[op]['min_sm']} or newer and this "
                    f"image also targets sm_{min(sms)}; expected it under "
                    f"deepspeed.skip with the reason",
                )
        return cls(
            version=version,
            accelerator=spec["accelerator"],
            switches=tuple(sorted((table[op]["build_var"], "1" if op in promised else "0") for op in listed)),
            listed=tuple(listed),
            promised=tuple(promised),
            skipped=tuple(sorted(skip.items())),
            packages=tuple(sorted({pkg for op in promised for pkg in table[op].get("packages", ())})),
            fix_master_address=spec.get("fix_master_address", True),
            compiled_later=tuple(
                sorted(table[op]["build_var"] for op in promised if table[op].get("shares_sources_with") in promised)
            ),
        )
