"""`hpcml env lock TARGET REQUIREMENTS`: a researcher's own packages resolved by uv for the
image's Python and platform, with every distribution the image holds held at the image's
version (the target's lock is the constraint set), into builder.pyenv_lock's format. The env
holds only what the image lacks, so nothing of the image is ever replaced.

REQUIREMENTS is a requirements file (one PEP 508 requirement a line, `#` comments) or a
pyproject.toml (its [project] dependencies). A requirement that the image's pins rule out is
refused in one line naming the file, the line, the package and the image's version:

    requirements.txt:2: numpy<2.3: the image holds numpy 2.4.6 (target cpu's lock), which
    an env never replaces; loosen the requirement, or move the image's pin and rebuild it

Example: lock_pyenv(tree, "cpu", Path("requirements.txt")) -> PyenvLock(target="cpu",
pins=(Pinned("rich", "14.1.0", ...), ...))
"""

import json
import re
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement

from .. import lockfile, pyenv_lock, runner
from ..bundle import python_part
from ..errors import RecipeError, ToolError, shown
from ..fileio import read_given
from ..host import pip_indexes, uv
from ..host.which_apptainer import ready_apptainer
from ..resources import runtime_source
from .python import _pinned

# in every image's venv but in no lock: venv's own pip, which an env leaves as it is
UNLOCKED_IN_IMAGE = ("pip",)
_OPTION = re.compile(r"^-")


@dataclass(frozen=True)
class Asked:
    """One requirement as the user wrote it, and where."""

    line: int
    text: str
    requirement: Requirement

    @property
    def name(self) -> str:
        return lockfile.normal_name(self.requirement.name)


def read_requirements(path: Path) -> tuple:
    """The requirements of a requirements file or a pyproject.toml, as Asked, in order."""
    text = read_given(path, "a requirements file or a pyproject.toml")
    found = _from_pyproject(path, text) if path.name == "pyproject.toml" else _from_requirements(path, text)
    asked = tuple(_parsed(path, line, item) for line, item in found)
    if not asked:
        raise RecipeError("no requirement in it; name at least one package", file=str(path))
    return asked


def _from_requirements(path, text) -> list:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        item = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not item:
            continue
        if _OPTION.match(item):
            raise RecipeError(
                f"{shown(item)}: pip options are not taken in an env's requirements; name packages "
                "only (the sources are the host pip's, as the image's build uses them)",
                file=str(path),
                line=number,
            )
        found.append((number, item))
    return found


def _from_pyproject(path, text) -> list:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise RecipeError(f"not TOML: {error}", file=str(path)) from None
    dependencies = data.get("project", {}).get("dependencies")
    if not isinstance(dependencies, list) or not all(isinstance(item, str) for item in dependencies):
        raise RecipeError("expected a [project] table with dependencies, a list of requirements", file=str(path))
    lines = text.splitlines()
    return [(_line_of(lines, item), item) for item in dependencies]


def _line_of(lines, item) -> int | None:
    """The line a dependency is written on (its quoted text), for the error that names it."""
    return next((n for n, line in enumerate(lines, 1) if f'"{item}"' in line or f"'{item}'" in line), None)


def _parsed(path, line, item) -> Asked:
    try:
        requirement = Requirement(item)
    except InvalidRequirement as error:
        raise RecipeError(
            f"{shown(item)}: not a requirement ({str(error).splitlines()[0]}); "
            "expected NAME[EXTRAS] VERSIONS such as rich>=13",
            file=str(path),
            line=line,
        ) from None
    if requirement.url:
        raise RecipeError(
            f"{shown(item)}: a direct reference has no version to lock; put its wheel or sdist in a "
            "folder the host pip's find-links names, and ask for it by name and version",
            file=str(path),
            line=line,
        )
    return Asked(line, item, requirement)


@dataclass(frozen=True)
class Held:
    """What an env is resolved against: the image's distributions, its Python and platform,
    the extra indexes its lock was made with, and what they come from (pyenv_lock's header)."""

    pins: dict  # {normal name: Pinned}
    python: str
    platform: str
    indexes: tuple
    kind: str  # pyenv_lock.LOCK or pyenv_lock.IMAGE
    digest: str  # the sha256 of the lock, or of the image's distributions


def held_pins(tree, target, images: Path | None = None) -> Held:
    """Every distribution of the target's image: its lock's pins and the runtime; for a target
    without a lock (LUMI's, a site's own image), what its built image under ``images`` holds."""
    lock = target.python_lock
    if isinstance(lock, lockfile.StaleLock):
        raise RecipeError(lock.message, file="command line")
    if lock is None:
        return _held_by_image(target, images)
    pins = {pin.name: pin for step in lock.steps for pin in step.pins}
    name, version = _runtime_distribution()
    pins[name] = lockfile.Pinned(name, version, ())
    python, platform = lockfile.platform_of(target, tree.versions.data)
    return Held(pins, python, platform, tuple(python_part.indexes(lock)), pyenv_lock.LOCK, pyenv_lock.lock_digest(lock))


def _held_by_image(target, images) -> Held:
    """The built image's distributions, Python and glibc, read by one exec of its Python
    (builder/pyenv_inside.py's --facts): a target without a lock is locked against its image."""
    image = Path(images or "images") / f"{target.name}.sif"
    if not image.is_file():
        raise RecipeError(
            f"target {target.name} has no lock (recipes/locks/{target.name}/python.txt), so an env is locked "
            f"against its built image, and there is none here; build it, or give --images DIR where it is",
            file=str(image),
        )
    apptainer = ready_apptainer(target.sites[0])
    code = pyenv_lock.INSIDE.read_text()
    python = f"{target.python.venv}/bin/python"
    answer = runner.run([apptainer, "exec", str(image), python, "-I", "-c", code, "--facts"], timeout=600)
    facts = json.loads(answer.stdout.strip().splitlines()[-1])
    pins = {name: lockfile.Pinned(name, version, ()) for name, version in facts["pins"]}
    platform = lockfile.manylinux(target.arch, facts["glibc"])
    return Held(pins, facts["python"], platform, (), pyenv_lock.IMAGE, facts["distributions_sha256"])


def _runtime_distribution() -> tuple:
    project = tomllib.loads((runtime_source() / "pyproject.toml").read_text())["project"]
    return lockfile.normal_name(project["name"]), project["version"]


def lock_pyenv(tree, name: str, requirements: Path, images: Path | None = None) -> pyenv_lock.PyenvLock:
    """The env's lock: what the requirements need that the image lacks, by hash."""
    target = tree.target(name)
    image = held_pins(tree, target, images)
    held, python, platform, indexes = image.pins, image.python, image.platform, list(image.indexes)
    asked = read_requirements(requirements)
    environment = _marker_environment(python, target.arch)
    origin = f"target {target.name}'s lock" if image.kind == pyenv_lock.LOCK else f"{target.name}'s built image"
    for each in asked:
        _check_against_image(each, held, origin, requirements, environment)
    down = pip_indexes.indexes_down(indexes)
    constraints = [f"{n}=={p.version}" for n, p in sorted(held.items())]
    with tempfile.TemporaryDirectory(prefix="hpcml-held-") as stubs:
        _stub_wheels(Path(stubs), held)

        def compile_(items):
            return uv.compile_pylock(
                items, python, platform, indexes=indexes, down=down, constraints=constraints, find_links=[stubs]
            )

        packages, error = compile_([each.text for each in asked])
        if packages is None:
            raise _unmet(asked, error, held, target.name, requirements, compile_)
    pins = []
    for package in packages:
        package_name = lockfile.normal_name(package["name"])
        if package_name in held:
            continue
        if package_name in UNLOCKED_IN_IMAGE:
            raise RecipeError(
                f"the requirements need {package_name} {package['version']}, which is the image venv's own tool; "
                "an env does not replace it",
                file=str(requirements),
            )
        pins.append(_pinned(package))
    return pyenv_lock.PyenvLock(
        target=target.name,
        python=python,
        platform=platform,
        image_lock=image.digest,
        source=requirements.name,
        asked=tuple(each.text.replace(" ", "") for each in asked),
        pins=tuple(sorted(pins, key=lambda pin: pin.name)),
        kind=image.kind,
    )


def _stub_wheels(folder: Path, held: dict) -> None:
    """A wheel of metadata alone for each distribution the image holds, at its version: the
    resolve never needs a source of the image's own packages (PyTorch's index, a site's
    wheel), which a package that depends on torch would otherwise send it to. Their own
    requirements are the image's business: every one of them is held too."""
    for name, pin in held.items():
        info = f"{name.replace('-', '_')}-{pin.version}.dist-info"
        with zipfile.ZipFile(folder / f"{name.replace('-', '_')}-{pin.version}-py3-none-any.whl", "w") as stub:
            stub.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {pin.version}\n")
            stub.writestr(
                f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: hpcml\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
            )
            stub.writestr(f"{info}/RECORD", "")


def _marker_environment(python: str, arch: str) -> dict:
    """PEP 508's marker values of the image's Python, not the host's."""
    environment = default_environment()
    environment.update(
        python_version=python,
        python_full_version=f"{python}.0",
        platform_machine=arch,
        sys_platform="linux",
        platform_system="Linux",
        os_name="posix",
        implementation_name="cpython",
        platform_python_implementation="CPython",
    )
    return environment


def _check_against_image(each: Asked, held: dict, origin: str, path: Path, environment: dict) -> None:
    """One line when a requirement rules out the version of a package the image holds."""
    requirement = each.requirement
    if requirement.marker and not requirement.marker.evaluate(environment):
        return
    pin = held.get(each.name)
    if pin is None or requirement.specifier.contains(pin.version, prereleases=True):
        return
    raise RecipeError(
        f"{shown(each.text)}: the image holds {each.name} {pin.version} ({origin}), which an env "
        "never replaces; loosen the requirement, or move the image's pin and rebuild the image",
        file=str(path),
        line=each.line,
    )


def _unmet(asked, error, held, target, path, compile_) -> Exception:
    """Why uv found no solution: the first requirement that alone cannot be met beside the
    image's pins, named by its line; else uv's reason for them all."""
    for each in asked:
        alone, reason = compile_([each.text])
        if alone is None:
            named = sorted(name for name in held if re.search(rf"\b{re.escape(name)}\b", reason))
            beside = ", ".join(f"{name} {held[name].version}" for name in named)
            what = f"cannot be installed beside the image's {beside}" if beside else "cannot be resolved"
            return RecipeError(f"{shown(each.text)}: {what}: {_last_words(reason)}", file=str(path), line=each.line)
    return ToolError(f"uv could not lock {path} against target {target}'s image: {_last_words(error)}")


def _last_words(error: str) -> str:
    """uv's reason on one line: its last three lines, stripped of its decoration."""
    lines = [line.strip(" ╰─▶×|\t") for line in error.strip().splitlines() if line.strip()]
    return " ".join(lines[-3:])
