"""A suite's Packages index as `apt-get update` downloads it into a private apt state
(host/debian_resolve.py): plain deb822 files, `lists/*_Packages`, one stanza a package,
stanzas separated by blank lines. Read here for what debootstrap takes (``required``) and
for the sha256 of each .deb (``hashed``): the index is what the suite's signed Release file
holds the sha256 of, so a .deb's hash read from it is the archive's own word. Example:

    hashed([DebPackage("bash", "5.2.15-2+b7", "amd64")], lists, "bookworm from URL")
    # -> (DebPackage("bash", "5.2.15-2+b7", "amd64", "4bd1..."),)
"""

import dataclasses
import itertools
import re
from pathlib import Path

from ..errors import ToolError

FIELDS = ("Package", "Version", "Architecture", "Priority", "Filename", "SHA256")  # all that is read
SHA256 = re.compile(r"[0-9a-f]{64}")


def stanzas(index: Path):
    """Each stanza of one plain Packages file as {field: value}, of FIELDS only."""
    with open(index, errors="replace") as handle:
        yield from read_stanzas(handle)


def read_stanzas(lines):
    """Each stanza of a Packages index's ``lines`` (an open file, plain or unpacked) as
    {field: value}, of FIELDS only. A continuation line starts with a space, so it is never
    taken for a field."""
    fields = {}
    for line in itertools.chain(lines, [""]):  # the "" ends the last stanza
        if not line.strip():
            if fields:
                yield fields
            fields = {}
            continue
        key, colon, value = line.partition(":")
        if colon and key in FIELDS:
            fields[key] = value.strip()


def required(lists: Path, suite: str, component: str) -> list[str]:
    """The names of Priority: required in the suite's index of the component: debootstrap
    takes them from main alone, and not from the suite's pockets (updates, security)."""
    names = {
        stanza["Package"]
        for index in sorted(lists.glob(f"*_dists_{suite}_{component}_binary-*_Packages"))
        for stanza in stanzas(index)
        if stanza.get("Priority") == "required" and "Package" in stanza
    }
    return sorted(names)


def hashed(packages, lists: Path, source: str) -> tuple:
    """``packages`` (DebPackage) each with the sha256 of its .deb as the downloaded index of
    every component gives it; a one-line ToolError naming those the index gives none for.
    ``source`` names the suite and mirror in it."""
    wanted = {(p.name, p.version, p.arch) for p in packages}
    found = {}
    for index in sorted(lists.glob("*_Packages")):
        for stanza in stanzas(index):
            key = (stanza.get("Package"), stanza.get("Version"), stanza.get("Architecture"))
            if key in wanted and SHA256.fullmatch(stanza.get("SHA256", "")):
                found.setdefault(key, stanza["SHA256"])
    missing = [f"{n}={v} {a}" for n, v, a in sorted(wanted - found.keys())]
    if missing:
        raise ToolError(f"the Packages index of {source} gives no SHA256 for: {', '.join(missing)}")
    return tuple(sorted(dataclasses.replace(p, sha256=found[(p.name, p.version, p.arch)]) for p in packages))
