"""An image's root file system as one canonical listing, its digest, and the files two images
write differently: what `hpcml verify --rebuild` and the two-cold-builds check compare.

The listing has a line per path, sorted: the path, its kind (file, dir, link, other), its
permission bits, and for a file the sha256 of its contents, for a link its target. Not the
owner (an ordinary user who unpacks an image owns every file) and not the times (a rebuild is
made on another day; SIF files differ in their header's time and UUID anyway). The paths
builder.reproducible declares are left out, so two images that match give the same digest.

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

from .. import fileio, reproducible, runner
from ..errors import ToolError
from ..host import build_route, sif

UNPACK_TIMEOUT_S = 1800


def unpack(apptainer, image: Path, into: Path, unprivileged=None) -> Path:
    """The image's root file system as a folder (Apptainer's sandbox), ``into`` replaced;
    unprivileged: by unsquashfs at the root partition's offset, where Apptainer can make no
    user namespace (the files then belong to the user: the listing has no owners anyway);
    None: so where Apptainer cannot (build_route.cannot_sandbox)."""
    if unprivileged is None:
        unprivileged = build_route.cannot_sandbox(apptainer)
    fileio.remove_tree(into)
    try:
        if unprivileged:
            sif.unpack(sif.root_partition(apptainer, image), into, into.parent / "unsquashfs.log")
        else:
            runner.run([apptainer, "build", "--force", "--sandbox", str(into), str(image)], timeout=UNPACK_TIMEOUT_S)
    except ToolError as error:
        raise ToolError(f"could not unpack {image}: {error}") from None
    return into


@contextlib.contextmanager
def unpacked(apptainer, image: Path, near: Path = None, unprivileged=None):
    """``image``'s root file system, unpacked for the while in the folder ``near`` (default:
    the image's own; a published image's may not be writable)."""
    work = Path(tempfile.mkdtemp(prefix=".hpcml-rootfs-", dir=(near or image).resolve().parent))
    try:
        yield unpack(apptainer, image, work / "root", unprivileged)
    finally:
        fileio.remove_tree(work)


def image_listing(apptainer, image: Path, near: Path = None) -> list:
    """The listing of ``image``'s files (unpacked as ``unpacked`` does)."""
    with unpacked(apptainer, image, near) as root:
        return listing(root)


def listing(root: Path) -> list:
    """The canonical lines of the tree under ``root``, the declared paths left out."""
    lines = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        relative = "/" + os.path.relpath(folder, root) if folder != str(root) else "/"
        for name in sorted([*dirs, *files]):
            path = f"{relative.rstrip('/')}/{name}"
            if not reproducible.declared(path + ("/" if name in dirs else "")):
                lines.append(_line(path, Path(folder, name)))
        # a declared folder is not walked
        dirs[:] = [d for d in dirs if not reproducible.declared(f"{relative.rstrip('/')}/{d}/")]
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
