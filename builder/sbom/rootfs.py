"""An image's root file system as one canonical listing, its digest, and the files two images
write differently: what `hpcml verify --rebuild` and the two-cold-builds check compare.

The listing has a line per path, sorted: the path, its kind (file, dir, link, other), its
permission bits, and for a file the sha256 of its contents, for a link its target. Not the
owner (an ordinary user who unpacks an image owns every file) and not the times: it names the
files that differ where two images' sha256 does not match (layerbuild/packing.py makes them
match), and an image packed before that had the day's times.

    entries = listing(unpack(apptainer, Path("images/cpu.sif"), work))
    with unpacked(apptainer, Path("images/cpu.sif")) as root: ...  # a folder removed after
    digest(entries)          # "sha256:4be1..."
    differing(entries, other) # ["/opt/venv/lib/python3.11/site-packages/x.pyc", ...]
"""

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from .. import fileio
from ..errors import ToolError
from ..host import sif


def unpack(apptainer, image: Path, into: Path) -> Path:
    """The image's root file system as a folder, ``into`` replaced: unsquashfs at the root
    partition's offset, byte for byte what the image holds (`apptainer build --sandbox` would
    add its own labels and definition), with no namespace (LUMI's login nodes have none). An
    ordinary user owns the files then: the listing has no owners anyway."""
    fileio.remove_tree(into)
    try:
        sif.unpack(sif.root_partition(apptainer, image), into, into.parent / "unsquashfs.log")
    except ToolError as error:
        raise ToolError(f"could not unpack {image}: {error}") from None
    return into


@contextlib.contextmanager
def unpacked(apptainer, image: Path, near: Path = None):
    """``image``'s root file system, unpacked for the while in the folder ``near`` (default:
    the image's own; a published image's may not be writable)."""
    work = Path(tempfile.mkdtemp(prefix=".hpcml-rootfs-", dir=(near or image).resolve().parent))
    try:
        yield unpack(apptainer, image, work / "root")
    finally:
        fileio.remove_tree(work)


def image_listing(apptainer, image: Path, near: Path = None) -> list:
    """The listing of ``image``'s files (unpacked as ``unpacked`` does)."""
    with unpacked(apptainer, image, near) as root:
        return listing(root)


def listing(root: Path) -> list:
    """The canonical lines of the tree under ``root``, every path."""
    lines = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        relative = "/" + os.path.relpath(folder, root) if folder != str(root) else "/"
        for name in sorted([*dirs, *files]):
            lines.append(_line(f"{relative.rstrip('/')}/{name}", Path(folder, name)))
    return sorted(lines)


def _line(path: str, where: Path) -> str:
    info = where.lstat()
    mode = f"{stat.S_IMODE(info.st_mode):04o}"
    if stat.S_ISLNK(info.st_mode):
        return f"{path}\tlink\t{mode}\t{os.readlink(where)}"
    if stat.S_ISDIR(info.st_mode):
        return f"{path}\tdir\t{mode}\t-"
    if stat.S_ISREG(info.st_mode):
        return f"{path}\tfile\t{mode}\t{_sha256(where)}"
    return f"{path}\tother\t{mode}\t-"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
    except PermissionError:
        return "unreadable"
    return digest.hexdigest()


def file_text(root: Path, path: str):
    """The text of the file at ``path`` (absolute, in the image) under the unpacked ``root``;
    None where there is none, or where a link on the way leads out of the tree (an absolute
    link names the image's own file, not the host's)."""
    where = root / path.lstrip("/")
    try:
        inside = where.resolve().is_relative_to(root.resolve())
        return where.read_text(errors="replace") if inside and where.is_file() else None
    except OSError:
        return None


def digest(lines) -> str:
    """One sha256 over the listing: equal for two images that hold the same files."""
    return "sha256:" + hashlib.sha256("".join(f"{line}\n" for line in lines).encode()).hexdigest()


def differing(a, b) -> list:
    """The paths whose lines differ between two listings (in one only, or written otherwise)."""
    first, second = (dict(line.split("\t", 1) for line in lines) for lines in (a, b))
    return sorted(path for path in first.keys() | second.keys() if first.get(path) != second.get(path))
