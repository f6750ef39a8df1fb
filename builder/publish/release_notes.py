"""CHANGES.txt beside a published image: what `hpcml diff` says between the module's previous
version and this one (Python distributions, Debian packages, DeepSpeed ops, image facts), the
release notes an admin hands on. The previous version is the one of the same name published
last, by its publish.json; the first version of a name says that it is the first.

Plain text for people, one value per line: every value (a package's name or version from an
SBOM, a folder's name, the version) reaches the file through `values.check.comment()`, so no
control character or line separator in it starts a line of its own.

    place(staging, Path("images/cpu.sbom.json"), prefix / "pytorch", "2.13.0-cpu")
"""

import json
import shutil
from pathlib import Path

from .. import sbom
from ..errors import RecipeError
from ..published import MANIFEST
from ..sbom import diff
from ..values.check import comment

CHANGES = "CHANGES.txt"


def previous(name_folder: Path, version: str):
    """The folder of the version of this name published last, other than ``version``, that
    has an SBOM; None when there is none."""
    found = []
    for folder in name_folder.iterdir() if name_folder.is_dir() else ():
        if folder.name == version or folder.name.startswith(".") or not (folder / sbom.PUBLISHED).is_file():
            continue
        try:
            published = json.loads((folder / MANIFEST).read_text())["published"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        found.append((str(published), folder.name, folder))
    return max(found)[2] if found else None


def place(staging: Path, new_sbom: Path, name_folder: Path, version: str) -> None:
    """The new version's SBOM (sbom.cdx.json) and CHANGES.txt, made from it, into ``staging``."""
    shutil.copyfile(new_sbom, staging / sbom.PUBLISHED)
    write(staging, new_sbom, name_folder, version)


def summary(root: Path) -> str:
    """The release notes' last line ("3 changes", "no differences"), or what they say whole."""
    lines = (root / CHANGES).read_text().splitlines()
    return lines[-1] if len(lines) > 1 else lines[0]


def write(staging: Path, new_sbom: Path, name_folder: Path, version: str) -> str:
    """Write CHANGES.txt into ``staging``; its last line, for publish's summary."""
    before = previous(name_folder, version)
    name = comment(name_folder.name)
    heading = f"Changes in {name}/{comment(version)}"
    if before is None:
        body = f"{heading}: the first published version of {name}; nothing to compare.\n"
    else:
        since = comment(before.name)
        try:
            old, new = diff.load(str(before)), diff.load(str(new_sbom))
        except RecipeError as error:  # an unreadable old SBOM must not stop a publish
            body = f"{heading} since {since}: not compared ({comment(error.message)})\n"
        else:
            # compared as they are (two names that escape alike stay two), then shown escaped
            sections = [
                diff.Section(section.title, tuple(comment(line) for line in section.lines))
                for section in diff.compare(old, new)
            ]
            body = f"{heading} since {since} (hpcml diff):\n" + diff.text(_shown(old), _shown(new), sections)
    (staging / CHANGES).write_text(body)
    return body.splitlines()[-1] if before is not None else body.strip()


def _shown(value):
    """An SBOM with each text in it escaped by comment(), for the header lines that
    `diff.text` makes of it (which image, which layer key)."""
    if isinstance(value, dict):
        return {key: _shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shown(item) for item in value]
    return comment(value) if isinstance(value, str) else value
