"""Whether an image holds its lock: the Debian packages and Python distributions of its SBOM
against the target's locks (builder/lockfile.py), one line per component that is missing,
extra, of another version or of another architecture. The build checks its image so
(sbom.ensure); `hpcml verify --lock IMAGE` checks any image, by its SBOM or, a .sif without
one, by what the image holds (inventory). Two distributions are the image's without being in
the lock, each for its reason.

No hashes are compared: a lock's sha256 is of the .deb, wheel or sdist file apt or pip took,
which the image does not keep, and the SBOM's components carry none of them (document.py's
one hash, on DeepSpeed's component, is of the wheel the image built from the locked sdist: a
file the lock never names). So versions, and a Debian package's architecture, are compared.

Example: differences(Path("images/cpu.sbom.json"), lock) -> [] for an image built from it;
["regex 2026.11.19 is in the image, not in the lock"] for one that pulled in more.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import RecipeError
from ..lockfile import LOCKS_DIR, PythonLock, StaleLock, normal_name

# {distribution: why the image holds it though the lock does not name it}
NOT_LOCKED = {
    "hpc-ml-runtime": "the project's own wheel, which the definition names by its sha256",
    "pip": "the venv's own, from the OS's python3-venv package (its version is the OS's)",
}
DEBIAN, PYTHON = "Debian packages", "Python distributions"


def image_dists(sbom: Path) -> dict:
    """{normal name: version} of the Python distributions an SBOM lists."""
    return dists_of(_components(sbom))


def dists_of(components) -> dict:
    return {
        normal_name(str(c.get("name", ""))): str(c.get("version", ""))
        for c in components
        if str(c.get("purl", "")).startswith("pkg:pypi/")
    }


def differences(sbom: Path, lock) -> list:
    """One line per distribution on which the image and ``lock`` disagree, sorted by name."""
    return _dist_lines(image_dists(sbom), lock, "lock")


def _dist_lines(found: dict, lock, title: str) -> list:
    wanted = {normal_name(pin.name): (pin.version,) for step in lock.steps for pin in step.pins}
    found = {name: (version,) for name, version in found.items() if name not in NOT_LOCKED}
    return _disagreements(wanted, found, title)


def image_debs(sbom: Path) -> dict:
    """{package: (version, architecture)} of the Debian packages an SBOM lists."""
    return debs_of(_components(sbom))


def debs_of(components) -> dict:
    found = {}
    for component in components:
        purl = str(component.get("purl", ""))
        if purl.startswith("pkg:deb/"):
            query = dict(item.split("=", 1) for item in purl.partition("?")[2].split("&") if "=" in item)
            found[str(component.get("name", ""))] = (str(component.get("version", "")), query.get("arch", ""))
    return found


def deb_differences(sbom: Path, lock) -> list:
    """One line per Debian package on which the image and the final stage's ``lock`` disagree."""
    return _deb_lines(image_debs(sbom), lock)


def _deb_lines(found: dict, lock) -> list:
    return _disagreements({p.name: (p.version, p.arch) for p in lock.packages}, found, "Debian lock")


def _components(sbom: Path) -> list:
    return json.loads(sbom.read_text()).get("components", [])  # cyclonedx leaves out an empty list


def _disagreements(wanted: dict, found: dict, lock: str, holder: str = "image") -> list:
    """{name: (version, arch?)} of the lock and the image (or env), as lines, sorted by name."""
    lines = []
    for name in sorted(wanted.keys() | found.keys()):
        if name not in found:
            lines.append(f"{name} {wanted[name][0]} is in the {lock}, not in the {holder}")
        elif name not in wanted:
            lines.append(f"{name} {found[name][0]} is in the {holder}, not in the {lock}")
        elif found[name][0] != wanted[name][0]:
            lines.append(f"{name} is {found[name][0]} in the {holder}, {wanted[name][0]} in the {lock}")
        elif found[name] != wanted[name]:  # the same version built for another architecture
            lines.append(
                f"{name} {found[name][0]} is {found[name][1]} in the {holder}, {wanted[name][1]} in the {lock}"
            )
    return lines


# --- `hpcml verify --lock IMAGE` ------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """An image against its target's locks. Example: Verdict("cpu", {DEBIAN: (), PYTHON:
    ("numpy is 2.4.7 in the image, 2.4.6 in the Python lock",)}, {DEBIAN: 144, PYTHON: 75})."""

    target: str
    differ: dict  # {DEBIAN or PYTHON: (line, ...)}, for each lock the target has
    locked: dict  # {DEBIAN or PYTHON: how many the lock names}
    kinds: tuple = (DEBIAN, PYTHON)  # the locks there are to have (a project env: Python's alone)

    @property
    def lines(self) -> list:
        return [line for lines in self.differ.values() for line in lines]

    def summary(self, image) -> str:
        absent = "".join(f"; the target has no lock of {what}" for what in self.kinds if what not in self.locked)
        if not self.lines:
            counts = ", ".join(f"{count} {what}" for what, count in self.locked.items())
            return f"{image} matches the lock of {self.target}: {counts}{absent}"
        counts = [
            f"{len(lines)} {what.removesuffix('s') if len(lines) == 1 else what}"
            for what, lines in self.differ.items()
            if lines
        ]
        verb = "differs" if len(self.lines) == 1 else "differ"
        return f"{image} does not match the lock of {self.target}: {' and '.join(counts)} {verb}{absent}"


def verify(argument: str, tree, named: str = "", apptainer=None) -> Verdict:
    """The image ``argument`` names (a .sif, its SBOM, or a published version's folder) against
    the locks of target ``named``, else of the target it records, else of its file name's.
    A .sif is read by the SBOM beside it; without one, by running the image's probe."""
    from . import diff, path_for  # sbom/__init__ imports this module: these are not defined yet

    image = Path(argument)
    if image.name.endswith(".sif") and image.is_file() and not path_for(image).is_file():
        return _from_image(image, tree, named, apptainer)
    document = diff.load(argument)  # a one-line RecipeError for what is not an SBOM
    components = document["components"]
    target = _target(tree, argument, named, _recorded_target(document), "its SBOM")
    return compare(tree, target, debs_of(components), dists_of(components))


def _from_image(image: Path, tree, named: str, apptainer) -> Verdict:
    from ..host.images import read_labels
    from ..host.which_apptainer import ready_apptainer
    from . import inventory

    apptainer = apptainer or ready_apptainer(None)
    recorded = "" if named else read_labels(apptainer, image).short("target")
    target = _target(tree, str(image), named, recorded, "its labels")
    contents = inventory.read(apptainer, image, target.python.venv)
    debs = {name: (version, arch) for name, version, arch in contents.debs}
    return compare(tree, target, debs, {normal_name(name): version for name, version in contents.dists})


def _recorded_target(document: dict) -> str:
    """The target an SBOM says its image was built as (document.py's `hpcml:target`); ''."""
    from . import PROPERTY

    component = (document.get("metadata") or {}).get("component") or {}
    properties = component.get("properties") or []
    found = [p.get("value") for p in properties if isinstance(p, dict) and p.get("name") == PROPERTY + "target"]
    return str(found[0] if found else component.get("name") or "")


def _target(tree, argument: str, named: str, recorded: str, where: str):
    """--lock-target's target; else the one the image records; else the one its file names."""
    if named:
        return tree.target(named)
    name, source = (recorded, where) if recorded else (Path(argument).name.split(".")[0], "its file name")
    known = {*tree.targets, *tree.aliases, *tree.unusable}
    if name not in known:
        raise RecipeError(
            f"{source} names target {name!r}, which the recipes do not have; expected one of: "
            f"{', '.join(sorted(known))} (or name it with --lock-target)",
            file=argument,
        )
    return tree.target(name)


def compare(tree, target, debs: dict, dists: dict) -> Verdict:
    """What the image holds ({package: (version, arch)}, {distribution: version}) against the
    target's final stage's Debian lock and its Python lock, those it has."""
    python, final = _locks(tree, target)
    differ, locked = {}, {}
    if final is not None:
        differ[DEBIAN], locked[DEBIAN] = tuple(_deb_lines(debs, final)), len(final.packages)
    if python is not None:
        differ[PYTHON] = tuple(_dist_lines(dists, python, "Python lock"))
        locked[PYTHON] = len({normal_name(pin.name) for step in python.steps for pin in step.pins})
    return Verdict(target.name, differ, locked)


def _locks(tree, target):
    """(Python lock, final stage's Debian lock), either None; one line when it has neither."""
    python = target.python_lock
    if isinstance(python, StaleLock):
        raise RecipeError(python.message)
    final = next((deb for deb in target.debian_locks if deb.stage == "final"), None)
    if isinstance(python, PythonLock) or final is not None:
        return (python if isinstance(python, PythonLock) else None), final
    locked = sorted(name for name, t in tree.targets.items() if t.python_lock or t.debian_locks)
    raise RecipeError(
        f"target {target.name} has no lock to verify against (no python.txt, no debian-final.txt; "
        f"site images and unlocked targets have none); expected one of: {', '.join(locked)}",
        file=str(Path(tree.root, LOCKS_DIR, target.name)),
    )


def verify_pyenv(env: Path, lock_path: Path) -> Verdict:
    """A project env's file (what its record says it holds) against its lock (pyenv_lock)."""
    from ..host import pyenv_file
    from ..pyenv_lock import load

    lock = load(lock_path)
    facts = pyenv_file.record(env)
    if facts is None:
        raise RecipeError("cannot read the env here: unsquashfs is missing (squashfs-tools)", file=str(env))
    found = {normal_name(str(name)): (str(version),) for name, version in facts.get("distributions", [])}
    wanted = {normal_name(pin.name): (pin.version,) for pin in lock.pins}
    lines = _disagreements(wanted, found, "env lock", "env")
    return Verdict(str(lock_path), {PYTHON: tuple(lines)}, {PYTHON: len(wanted)}, kinds=(PYTHON,))
