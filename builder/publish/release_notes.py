"""CHANGES.txt beside a published image: what `hpcml diff` says between the module's previous
version and this one (Python distributions, Debian packages, DeepSpeed ops, image facts), the
release notes an admin hands on. The previous version is the one of the same name published
last, by its publish.json; the first version of a name says that it is the first.

    place(staging, Path("images/cpu.sbom.json"), prefix / "pytorch", "2.13.0-cpu")
"""

import json
import shutil
from pathlib import Path

from .. import sbom
from ..errors import RecipeError
from ..published import MANIFEST
from ..sbom import diff

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
    heading = f"Changes in {name_folder.name}/{version}"
    if before is None:
        body = f"{heading}: the first published version of {name_folder.name}; nothing to compare.\n"
    else:
        try:
            old, new = diff.load(str(before)), diff.load(str(new_sbom))
        except RecipeError as error:  # an unreadable old SBOM must not stop a publish
            body = f"{heading} since {before.name}: not compared ({error.message})\n"
        else:
            body = f"{heading} since {before.name} (hpcml diff):\n" + diff.text(old, new, diff.compare(old, new))
    (staging / CHANGES).write_text(body)
    return body.splitlines()[-1] if before is not None else body.strip()
