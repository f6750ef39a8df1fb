"""The root filesystem inside a SIF: the squashfs partition `apptainer sif list` shows as
`FS (Squashfs/*System/...)`. unsquashfs reads it in place at its offset, so nothing copies the
image first: one file (`read_file`) or all of them (`unpack`)."""

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from .. import runner
from ..errors import ToolError

LIST_TIMEOUT_S = 120
# `1 |1 |NONE |32176-32757 |Def.FILE`: id, group, link, start-end, type
_OBJECT = re.compile(r"^\s*\d+\s*\|[^|]*\|[^|]*\|\s*(\d+)-(\d+)\s*\|\s*(.+?)\s*$")
_ROOT_TYPE = "FS (Squashfs/*System/"  # the primary system partition, as Apptainer mounts it
_PERMISSION_BITS = (0o400, 0o200, 0o100, 0o040, 0o020, 0o010, 0o004, 0o002, 0o001)  # rwxrwxrwx
_SPECIAL_BITS = ((3, 0o4000), (6, 0o2000), (9, 0o1000))  # setuid, setgid, sticky: where ls shows them
# `-rwsr-xr-x 0/0    68248 2025-12-14 14:00 squashfs-root/usr/bin/passwd`: mode, owner, path
_LISTED = re.compile(r"^(\S{10}) +(\d+)/(\d+) +\S+ +\S+ +\S+ squashfs-root(/.*)?$")


@dataclass(frozen=True)
class Partition:
    """Where the root filesystem lies in the image file."""

    image: Path
    offset: int
    size: int


def root_partition(apptainer, image: Path) -> Partition:
    """The image's root filesystem partition, from `apptainer sif list`."""
    image = image.resolve()  # the toolbox sees the host's folders at their absolute paths
    listing = runner.run([apptainer, "sif", "list", str(image)], timeout=LIST_TIMEOUT_S).stdout
    for line in listing.splitlines():
        found = _OBJECT.match(line)
        if found and found[3].startswith(_ROOT_TYPE):
            start, end = int(found[1]), int(found[2])
            return Partition(image, start, end - start)
    raise ToolError(f"{image}: `apptainer sif list` shows no squashfs root filesystem ({_ROOT_TYPE}...)")


def read_file(partition: Partition, path: str) -> str:
    """The text of the regular file ``path`` (relative to the root) in the partition."""
    result = runner.run(_unsquashfs(partition, "-cat", str(partition.image), path), check=False, timeout=120)
    if result.returncode != 0:
        why = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ToolError(f"{partition.image}: cannot read /{path} from its root filesystem: {why}")
    return result.stdout


def unpack(partition: Partition, dest: Path, log: Path):
    """Every file of the partition under ``dest`` (which must not exist), with its mode,
    times and extended attributes, and as root its owner. An ordinary user's unsquashfs
    writes files through its umask and drops setuid and setgid bits: put back here (the
    user owns each file, so chmod may set them), so the modes are the image's for anyone."""
    runner.run_logged(
        _unsquashfs(partition, "-no-progress", "-quiet", "-d", str(dest), str(partition.image)),
        log,
        what=f"unpacking the root filesystem of {partition.image}",
    )
    if os.geteuid() != 0:
        for path, (mode, _, _) in listing(partition).items():
            where = dest / path.lstrip("/")
            if where.is_symlink() or not where.exists():
                continue
            if stat.S_IMODE(where.lstat().st_mode) != mode:
                where.chmod(mode)


def listing(partition: Partition) -> dict:
    """{"/usr/bin/passwd": (0o4755, 0, 0), ...}: each path's mode, owner and group in the image
    (links too), from `unsquashfs -lln`; a name with a line break in it is skipped."""
    found = {}
    for entry in _entries(partition):
        path = (entry[4] or "/").split(" -> ")[0] if entry[1][0] == "l" else entry[4] or "/"
        found[path] = (_mode_bits(entry[1]), int(entry[2]), int(entry[3]))
    return found


def sizes(partition: Partition) -> list:
    """[("-rw-r--r--", 9), ...]: each path's symbolic mode and, for a file, its size (0 for the
    rest: a device's column holds its numbers), from `unsquashfs -lln`."""
    found = [entry[0].split() for entry in _entries(partition)]
    return [(fields[0], int(fields[2]) if fields[0][0] == "-" else 0) for fields in found]


def _entries(partition: Partition) -> list:
    """The matches of `unsquashfs -lln`'s lines (_LISTED): what listing and sizes read."""
    listed = runner.run(_unsquashfs(partition, "-lln", str(partition.image)), timeout=600).stdout
    return [entry for entry in map(_LISTED.match, listed.splitlines()) if entry]


def _mode_bits(symbolic: str) -> int:
    """ "-rwsr-xr-x" -> 0o4755; "drwxrwsr-x" -> 0o2775; "drwxrwxrwt" -> 0o1777 (S and T: the
    special bit without execute)."""
    bits = sum(value for letter, value in zip(symbolic[1:], _PERMISSION_BITS) if letter in "rwxst")
    return bits | sum(special for index, special in _SPECIAL_BITS if symbolic[index] in "sStT")


def _unsquashfs(partition: Partition, *args) -> list:
    return ["unsquashfs", "-offset", str(partition.offset), *args]
