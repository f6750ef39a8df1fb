"""The record beside each built image, `<image>.sif.json`: the layer key it was built under,
with the file's size and mtime, so that a file replaced or touched since is not taken for the
one recorded. The build writes it (layerbuild/); publish, sign and extend read it, so it lives
below every stage.
"""

import json
from pathlib import Path

from ..fileio import write_atomic


def record_path(sif: Path) -> Path:
    return sif.with_name(sif.name + ".json")


def is_current(sif: Path, key: str) -> bool:
    """Whether ``sif`` is the file recorded as built under ``key``."""
    try:
        meta = json.loads(record_path(sif).read_text())
        stat = sif.stat()
    except (OSError, ValueError):
        return False
    return meta.get("key") == key and meta.get("size") == stat.st_size and meta.get("mtime_ns") == stat.st_mtime_ns


def current_key(sif: Path):
    """The layer key ``sif``'s record names while the file is still the one recorded, else None."""
    try:
        key = json.loads(record_path(sif).read_text()).get("key")
    except (OSError, ValueError, AttributeError):
        return None
    return key if key and is_current(sif, key) else None


def write(sif: Path, key: str):
    stat = sif.stat()
    write_atomic(
        record_path(sif),
        json.dumps({"key": key, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}, indent=1, sort_keys=True) + "\n",
    )
