"""The enroot squashfs: the image's root filesystem packed again by mksquashfs, with the image's
environment added to /etc/environment.

Why not the SIF's own squashfs partition, byte for byte: enroot (and Pyxis, and the CSCS
Container Engine, which use it) reads a container's environment from /etc/environment in the
image (enroot's doc/image-format.md; `enroot import` writes the OCI config's Env there), never
from Apptainer's /.singularity.d/env/. In the SIF that file is Debian's empty one, so the same
bytes would start with no venv on PATH. squashfs cannot change a file in place (mksquashfs
appends only at the top level), so the files are packed again: their owners, modes and times as
the SIF has them, the build date as the filesystem's own time.

gzip at level 1: every squashfs reader (kernel, squashfuse, unsquashfs) reads gzip, and level 1
took 30 CPU-seconds for the CPU image's 1.9 GB against about 250 at Apptainer's level 9, for
648 MB against 571 (zstd level 3: 14 CPU-seconds, 588 MB, but not every squashfuse reads zstd).
"""

import os
import stat
from pathlib import Path

from .. import runner
from ..errors import ToolError
from . import metadata

ENVIRONMENT = Path("etc") / "environment"
PACKING = ("-comp", "gzip", "-Xcompression-level", "1")  # 128 KiB blocks, as Apptainer's
HEADER = "# The image's environment (Apptainer's /.singularity.d/env/90-environment.sh), for enroot: hpcml export\n"


def write(rootfs: Path, meta: metadata.ImageMetadata, out: Path, log: Path):
    """``rootfs`` (changed: its /etc/environment) as the squashfs ``out``."""
    seconds = metadata.epoch(meta.created)
    add_environment(rootfs, meta.environment, seconds)
    argv = ["mksquashfs", str(rootfs), str(out), "-noappend", *PACKING]
    if seconds is not None:
        argv += ["-mkfs-time", str(seconds)]
    runner.run_logged([*argv, "-no-progress", "-quiet"], log, what="mksquashfs (the enroot squashfs)")


def environment_lines(environment: dict) -> str:
    """/etc/environment's form, as enroot reads it: NAME=value, one a line, no quotes."""
    lines = []
    for name, value in environment.items():
        if "\n" in value or "\0" in value:
            raise ToolError(f"the image's {name} holds a line break, which /etc/environment cannot hold")
        lines.append(f"{name}={value}\n")
    return "".join(lines)


def add_environment(rootfs: Path, environment: dict, seconds):
    """The image's own /etc/environment lines, then ``environment``'s (enroot takes the last of
    a name). Never through a link: it could point out of the root filesystem, onto the host."""
    etc = rootfs / ENVIRONMENT.parent
    if etc.is_symlink() or not etc.is_dir():
        raise ToolError(f"{etc}: the image's /etc is not a folder; enroot needs /etc/environment there")
    etc_times = os.stat(etc)
    path = rootfs / ENVIRONMENT
    old = ""
    if os.path.lexists(path):
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise ToolError(f"{path}: the image's /etc/environment is not a plain file")
        old = path.read_text()
    text = old + ("\n" if old and not old.endswith("\n") else "") + HEADER + environment_lines(environment)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    if seconds is not None:  # the same image gives the same squashfs
        os.utime(path, (seconds, seconds), follow_symlinks=False)
    os.utime(etc, ns=(etc_times.st_atime_ns, etc_times.st_mtime_ns), follow_symlinks=False)
