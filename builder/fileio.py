"""Atomic writes: a reader sees the old file or the new one, never half of either."""

import os
import shutil
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` unless it already holds exactly that; True if written."""
    data = text.encode()
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def link_or_copy(source, dest):
    """A hard link where the file system allows it (same inode, no space), else a copy."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)
