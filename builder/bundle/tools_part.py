"""The builder's own half of a bundle: every Python distribution `pip install` of this builder
needs (its dependencies, hatchling, which builds it, and theirs), at the versions the builder
that made the bundle runs with, under `tools/python/`, and `tools/requirements.txt`, which
pins each by the sha256 of its file. On a host with no network, beside a checkout:

    python3 -m venv .venv
    .venv/bin/pip install --no-index --find-links BUNDLE/tools/python --require-hashes -r BUNDLE/tools/requirements.txt
    .venv/bin/pip install --no-index --no-deps --no-build-isolation -e .

The files are for Python 3.11 to 3.14 and the one that made the bundle (`# python:` in the
requirements), and for any glibc from 2.28 on (RHEL 8 and later, SLES 15 SP3 and later,
Debian 11 and later) of the same CPU architecture.

Example: files(down=()) -> {"tools/python/pyyaml-6.0.3-cp311-...whl": ("https://.../pyyaml-...whl", "1d3c...",
"pyyaml==6.0.3")}
"""

import platform
import sys
from importlib import metadata

from packaging.requirements import Requirement

from ..errors import ToolError
from ..host import uv
from ..lockfile import normal_name
from .python_part import file_name, served_files

FOLDER = "tools/python"
REQUIREMENTS = "tools/requirements.txt"
BUILDER = "hpc-ml-containers"
GLIBC_FLOOR = "manylinux_2_28"  # the oldest glibc a site's login node is likely to have
# from requires-python's floor up: a site's login node has its own Python (trixie's is 3.13)
PYTHONS = ("3.11", "3.12", "3.13", "3.14")


def pins(distribution: str = BUILDER) -> dict:
    """{normal name: version} of what ``distribution`` requires, as installed here, all the way
    down, with the extras each requirement asks for (its own extras left out: the tests' tools
    are not the builder's); hatchling and its own, which build the builder, too."""
    found, seen = {}, set()
    todo = [(distribution, frozenset()), ("hatchling", frozenset())]
    while todo:
        name, extras = todo.pop()
        seen.add((normal_name(name), extras))
        found[normal_name(name)] = _version(name)
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            asked = [{"extra": extra} for extra in ("", *extras)]
            if requirement.marker and not any(requirement.marker.evaluate(env) for env in asked):
                continue
            if (normal_name(requirement.name), frozenset(requirement.extras)) not in seen:
                todo.append((requirement.name, frozenset(requirement.extras)))
    found.pop(normal_name(distribution), None)
    return dict(sorted(found.items()))


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        raise ToolError(f"{name}: the builder needs it but it is not installed here; run make setup") from None


def python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def target_platform() -> str:
    return f"{platform.machine()}-{GLIBC_FLOOR}"


def pythons() -> tuple:
    """The Python versions the tools serve: PYTHONS and the one running here."""
    return tuple(sorted({*PYTHONS, python_version()}, key=lambda v: tuple(map(int, v.split(".")))))


def files(down=()) -> dict:
    """{path in the bundle: (url, sha256, "name==version")} for each file of each pin, as the pip
    sources serve them for each of pythons() and the platform; one line names a pin no source
    serves."""
    wanted = pins()
    found = {}
    for python in pythons():
        packages = served_files(wanted, python, target_platform(), "the builder's own distributions", down=down)
        for package in packages:
            for served in uv.files(package):
                sha256 = served.get("hashes", {}).get("sha256")
                if sha256:
                    name = normal_name(package["name"])
                    found[f"{FOLDER}/{file_name(served)}"] = (served["url"], sha256, f"{name}=={wanted[name]}")
    missing = sorted(set(wanted) - {pin.split("==")[0] for _, _, pin in found.values()})
    if missing:
        raise ToolError(f"{missing[0]} {wanted[missing[0]]}: no pip source serves a file of it for the bundle's tools")
    return found


def requirements(listed: dict) -> str:
    """tools/requirements.txt for ``listed`` (what files() returned), in pip's format."""
    by_pin = {}
    for _, sha256, pin in listed.values():
        by_pin.setdefault(pin, []).append(sha256)
    lines = [
        "# The builder's own Python distributions, written by `hpcml bundle`; install them with",
        f"# pip install --no-index --find-links tools/python --require-hashes -r {REQUIREMENTS}",
        f"# python: {' '.join(pythons())}, {target_platform()}",
    ]
    for pin in sorted(by_pin, key=lambda pin: pin.split("==")[0]):
        lines.append(" ".join([pin, *(f"--hash=sha256:{sha256}" for sha256 in sorted(by_pin[pin]))]))
    return "\n".join(lines) + "\n"


def check(listed: dict, text: str) -> None:
    """Offline: every file under tools/python/ is one the requirements pin, and every pin has
    a file in the bundle's list ({path: sha256})."""
    pinned = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("==", 1)[0]
            pinned.update({word.removeprefix("--hash=sha256:"): name for word in line.split()[1:]})
    present = {sha256 for path, sha256 in listed.items() if path.startswith(f"{FOLDER}/")}
    for path, sha256 in sorted(listed.items()):
        if path.startswith(f"{FOLDER}/") and sha256 not in pinned:
            raise ToolError(f"{path}: the bundle holds a file {REQUIREMENTS} does not pin (sha256 {sha256})")
    for name in sorted(set(pinned.values())):
        if not present & {sha256 for sha256, pin in pinned.items() if pin == name}:
            raise ToolError(f"{name}: none of its pinned files is in the bundle ({REQUIREMENTS})")
