"""Whether an image holds its lock: the Python distributions of its SBOM against the target's
lock (builder/lockfile.py), one line per component that is missing, extra or of another
version. Two distributions are the image's without being in the lock, each for its reason.

Example: differences(Path("images/cpu.sbom.json"), lock) -> [] for an image built from it;
["regex 2026.11.19 is in the image, not in the lock"] for one that pulled in more.
"""

import json
from pathlib import Path

from ..lockfile import normal_name

# {distribution: why the image holds it though the lock does not name it}
NOT_LOCKED = {
    "hpc-ml-runtime": "the project's own wheel, which the definition names by its sha256",
    "pip": "the venv's own, from the OS's python3-venv package (its version is the OS's)",
}


def image_dists(sbom: Path) -> dict:
    """{normal name: version} of the Python distributions an SBOM lists."""
    components = json.loads(sbom.read_text()).get("components", [])  # cyclonedx leaves out an empty list
    return {normal_name(c["name"]): c["version"] for c in components if str(c.get("purl", "")).startswith("pkg:pypi/")}


def differences(sbom: Path, lock) -> list:
    """One line per distribution on which the image and ``lock`` disagree, sorted by name."""
    wanted = {normal_name(pin.name): (pin.version,) for step in lock.steps for pin in step.pins}
    found = {name: (version,) for name, version in image_dists(sbom).items() if name not in NOT_LOCKED}
    return _disagreements(wanted, found, "lock")


def image_debs(sbom: Path) -> dict:
    """{package: (version, architecture)} of the Debian packages an SBOM lists."""
    found = {}
    for component in json.loads(sbom.read_text()).get("components", []):
        purl = str(component.get("purl", ""))
        if purl.startswith("pkg:deb/"):
            query = dict(item.split("=", 1) for item in purl.partition("?")[2].split("&") if "=" in item)
            found[component["name"]] = (component["version"], query.get("arch", ""))
    return found


def deb_differences(sbom: Path, lock) -> list:
    """One line per Debian package on which the image and the final stage's ``lock`` disagree."""
    return _disagreements({p.name: (p.version, p.arch) for p in lock.packages}, image_debs(sbom), "Debian lock")


def _disagreements(wanted: dict, found: dict, lock: str) -> list:
    """{name: (version, ...)} of the lock and the image, as lines, sorted by name."""
    lines = []
    for name in sorted(wanted.keys() | found.keys()):
        if name not in found:
            lines.append(f"{name} {wanted[name][0]} is in the {lock}, not in the image")
        elif name not in wanted:
            lines.append(f"{name} {found[name][0]} is in the image, not in the {lock}")
        elif found[name] != wanted[name]:
            lines.append(f"{name} is {found[name][0]} in the image, {wanted[name][0]} in the {lock}")
    return lines
