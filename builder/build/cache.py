"""The user's cache: the toolbox, DeepSpeed wheels and built layers, keyed by content.

A layer built once (by `make build`, the tests or CI on the same machine) is linked into
place the next time the same key is asked for, in any images directory. Correctness never
depends on it: a missing or removed cache only means building again.
"""

import os
from pathlib import Path

from ..fileio import link_or_copy

KEEP_PER_LAYER = 2      # the newest keys of each target layer; older ones are pruned


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hpc-ml-containers"


def _slot(name, layer):
    return cache_dir() / "layers" / f"{name}.{layer}"


def fetch(name, layer, key, dest: Path) -> bool:
    """Put the stored layer with ``key`` at ``dest`` (atomically); False if none is stored."""
    stored = _slot(name, layer) / f"{key}.sif"
    if not stored.is_file():
        return False
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    link_or_copy(stored, tmp)
    os.replace(tmp, dest)
    return True


def store(name, layer, key, sif: Path):
    slot = _slot(name, layer)
    stored = slot / f"{key}.sif"
    if stored.is_file():
        return
    slot.mkdir(parents=True, exist_ok=True)
    tmp = slot / f".{key}.tmp-{os.getpid()}"
    link_or_copy(sif, tmp)
    os.replace(tmp, stored)
    older = sorted(slot.glob("*.sif"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in older[KEEP_PER_LAYER:]:
        old.unlink(missing_ok=True)
