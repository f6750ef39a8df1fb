"""The root filesystem inside a SIF: the squashfs partition `apptainer sif list` shows as
`FS (Squashfs/*System/...)`. unsquashfs reads it in place at its offset, so nothing copies the
image first: one file (`read_file`) or all of them (`unpack`)."""

import re
from dataclasses import dataclass
from pathlib import Path

from .. import runner
from ..errors import ToolError

LIST_TIMEOUT_S = 120
# `1 |1 |NONE |32176-32757 |Def.FILE`: id, group, link, start-end, type
_OBJECT = re.compile(r"^\s*\d+\s*\|[^|]*\|[^|]*\|\s*(\d+)-(\d+)\s*\|\s*(.+?)\s*$")
_ROOT_TYPE = "FS (Squashfs/*System/"  # the primary system partition, as Apptainer mounts it


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
    """Every file of the partition under ``dest`` (which must not exist), with its owner,
    mode, times and extended attributes: that needs root."""
    runner.run_logged(
        _unsquashfs(partition, "-no-progress", "-quiet", "-d", str(dest), str(partition.image)),
        log,
        what=f"unpacking the root filesystem of {partition.image}",
    )


def _unsquashfs(partition: Partition, *args) -> list:
    return ["unsquashfs", "-offset", str(partition.offset), *args]
