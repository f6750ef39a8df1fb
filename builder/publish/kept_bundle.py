"""What a published version keeps of the source bundle its image was built from (builder/bundle),
so that `hpcml rebuild` can build the image again with no network:

    PREFIX/<name>/<version>/bundle.SHA256SUMS   the bundle's own SHA256SUMS, byte for byte (--bundle)
                            bundle/             the whole bundle (--with-bundle): its SHA256SUMS and
                                                every file it lists

Both are in the version's SHA256SUMS, so `verify` reads them back, and publish.json records the
manifest's sha256 (`bundle.manifest_sha256`). The bundle is read back against the target's locks
(bundle.make.checked) before anything is written; one of another target or lock is refused in
one line. Files of 1 MiB or more that the publisher owns are hard links where the file system
allows (a bundle made again replaces its .debs and wheels by renames, never in place); the rest,
its locks among them, are copies. Nothing is taken from bundles/<target> unless it is named.

Example: kept = checked(tree, "cpu", "bundles/cpu", whole=True)   # before anything is written
         sums = place(staging, kept)                              # {"bundle/python/x.whl": "89cd...", ...}
"""

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..bundle import make, manifest
from ..errors import CheckFailed, RecipeError, ToolError
from ..fileio import copy_hashed
from ..invocation import program
from ..published import MANIFEST

KEPT_SUMS = "bundle.SHA256SUMS"  # the bundle's manifest, beside the image
KEPT = "bundle"  # the whole bundle, with --with-bundle
LINK_FROM = 1 << 20  # bytes: a smaller file is copied (a lock, an index), a larger one linked where it can be


@dataclass(frozen=True)
class Kept:
    """A bundle read back against the target's locks, and how much of it a version keeps."""

    folder: Path
    data: bytes  # its SHA256SUMS, as read
    files: dict  # {path in the bundle: sha256}, each file read back
    whole: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def record(self) -> dict:
        """publish.json's `bundle`."""
        return {"manifest_sha256": self.sha256, "files": len(self.files), "whole": self.whole}


def checked(tree, target_name, folder, whole=False):
    """The bundle at ``folder`` read back against ``target_name``'s locks, or None without one;
    a bundle of another target or lock, or with a changed file, is refused in one line (exit 2)."""
    if not folder:
        if whole:
            raise RecipeError("--with-bundle keeps the bundle --bundle DIR names; give both", file="command line")
        default = Path("bundles") / target_name
        if (default / manifest.NAME).is_file():  # explicit is better: never taken unnamed
            print(f"note: {default} is not kept with the image; publish --bundle {default} keeps its manifest")
        return None
    folder = Path(folder)
    listing = folder / manifest.NAME
    try:
        data = listing.read_bytes() if listing.is_file() else None
        files = make.checked(tree, target_name, folder)  # no SHA256SUMS: its own line, exit 2
        if listing.read_bytes() != data:
            raise CheckFailed(f"{listing}: changed while publish read the bundle back; publish again")
    except ToolError as error:  # made for another lock, or a file changed: the bundle given is not this one
        raise RecipeError(f"--bundle {error}", file="command line") from None
    except OSError as error:
        raise RecipeError(f"--bundle {listing}: cannot be read ({error.strerror})", file="command line") from None
    debian, python = make.locks_of(tree, target_name)
    locks = sorted(path for path in files if path.startswith(f"{make.LOCKS}/"))
    if len(locks) != len(debian) + len(python):  # each of this target's is there: checked says so
        raise RecipeError(
            f"--bundle {folder}: made for another target than {target_name} (it holds {', '.join(locks)}); "
            f"make {target_name}'s with: {program()} bundle {target_name} --out DIR",
            file="command line",
        )
    return Kept(folder.resolve(), data, files, whole)


def place(staging: Path, kept) -> dict:
    """Write what is kept of the bundle into the staging folder; {path in the version: sha256}
    of each file written ({} without a bundle), for the version's SHA256SUMS."""
    if kept is None:
        return {}
    (staging / KEPT_SUMS).write_bytes(kept.data)
    sums = {KEPT_SUMS: kept.sha256}
    if kept.whole:
        into = staging / KEPT
        into.mkdir()
        (into / manifest.NAME).write_bytes(kept.data)
        sums[f"{KEPT}/{manifest.NAME}"] = kept.sha256
        for path, sha256 in sorted(kept.files.items()):
            _link_or_copy(kept.folder / path, into / path, sha256)
            sums[f"{KEPT}/{path}"] = sha256
    return sums


def _link_or_copy(source: Path, dest: Path, sha256: str):
    """A hard link to a large file of the publisher's own (another's could change the
    published copy), else a copy whose bytes must be the ones the bundle lists."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    info = source.stat()
    if info.st_size >= LINK_FROM and info.st_uid == os.geteuid():
        try:
            os.link(source, dest)
            return
        except OSError:
            pass  # another file system, or links refused there: copied
    if copy_hashed(source, dest) != sha256:
        raise CheckFailed(f"{source}: changed since publish read it back (sha256 not the bundle's); publish again")


def summary(root: Path) -> str:
    """What the version at ``root`` keeps of its source bundle and how to rebuild from it, as
    publish and verify say it; "" when it keeps none."""
    if not (root / KEPT_SUMS).is_file():
        return ""
    spec, prefix = f"{root.parent.name}/{root.name}", root.parent.parent
    try:
        files = (json.loads((root / MANIFEST).read_text()).get("bundle") or {}).get("files", "?")
    except (OSError, ValueError, AttributeError):
        files = "?"  # verify names publish.json's problem
    rebuild = f"rebuild with: {program()} rebuild {spec} --prefix {prefix}"
    if (root / KEPT).is_dir():
        return f"kept whole in {KEPT}/ ({files} files); {rebuild}"
    digest = hashlib.sha256((root / KEPT_SUMS).read_bytes()).hexdigest()
    return f"its manifest kept as {KEPT_SUMS} ({files} files, sha256 {digest[:16]}...); {rebuild} --bundle DIR"
