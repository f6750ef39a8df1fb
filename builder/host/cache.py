"""The user's cache: the toolbox, built layers and kept step outputs, keyed by content.

A layer built once (by `make build`, the tests or CI on the same machine) is linked into
place the next time the same key is asked for, in any images directory. A kept step's output
(the DeepSpeed wheel, the network plugin; see render.parts.Kept) is stored under the folder
name its definition gives it, which carries the hash of its inputs. Correctness never depends
on the cache: a missing or removed entry only means building again.
"""

import os
import shutil
from pathlib import Path

from ..fileio import link_or_copy, write_atomic

KEEP_PER_LAYER = 2  # the newest keys of each target layer; older ones are pruned
KEEP_PER_STEP = 2  # the newest outputs of each kept step for each target, likewise
COMPLETE = "complete"  # written last by the step's save commands
SBOM = ".sbom.json"  # an image layer's SBOM, beside it: <key>.sbom.json


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hpc-ml-containers"


def slot(name, layer):
    return cache_dir() / "layers" / f"{name}.{layer}"


def fetch(name, layer, key, dest: Path) -> bool:
    """Put the stored layer with ``key`` at ``dest`` (atomically); False if none is stored,
    or if a concurrent build pruned it while we looked. A copy that fails part way (a full
    disk) leaves nothing behind and raises."""
    stored = slot(name, layer) / f"{key}.sif"
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        link_or_copy(stored, tmp)
        # a no-op where dest is already a link to the same file (rename(2)): tmp stays
        os.replace(tmp, dest)
    except FileNotFoundError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def store(name, layer, key, sif: Path):
    """Keep ``sif`` as the layer with ``key``; the older keys of the slot beyond the newest
    KEEP_PER_LAYER are pruned. A copy that fails part way leaves nothing behind and raises."""
    folder = slot(name, layer)
    stored = folder / f"{key}.sif"
    if stored.is_file():
        return
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{key}.tmp-{os.getpid()}"
    try:
        link_or_copy(sif, tmp)
        os.replace(tmp, stored)
    finally:
        tmp.unlink(missing_ok=True)
    older = sorted(folder.glob("*.sif"), key=mtime, reverse=True)
    for old in older[KEEP_PER_LAYER:]:
        old.unlink(missing_ok=True)
        old.with_name(old.stem + SBOM).unlink(missing_ok=True)


def fetch_sbom(name, key, dest: Path) -> bool:
    """The SBOM made of the image layer with ``key``, copied to ``dest``; False when the cache
    holds none (an SBOM is made of the layer's file, which the cache holds: the same file)."""
    try:
        text = (slot(name, "image") / f"{key}{SBOM}").read_text()
    except OSError:
        return False
    write_atomic(dest, text)
    return True


def store_sbom(name, key, sbom: Path):
    """Keep the SBOM of the image layer with ``key`` beside it, for the next images folder."""
    folder = slot(name, "image")
    if (folder / f"{key}.sif").is_file():
        write_atomic(folder / f"{key}{SBOM}", sbom.read_text())


def _kept(folder) -> Path:
    return cache_dir() / "kept" / folder


def fetch_kept(folder: str, dest: Path) -> bool:
    """Fill ``dest`` with the stored output named ``folder``; False if none is stored."""
    stored = _kept(folder)
    if not (stored / COMPLETE).is_file():
        return False
    try:
        shutil.copytree(stored, dest, symlinks=True, copy_function=link_or_copy)
    except (FileNotFoundError, shutil.Error):  # pruned by a concurrent build meanwhile
        shutil.rmtree(dest, ignore_errors=True)
        return False
    return True


def store_kept(folder: str, made: Path, owner: str = ""):
    """Keep a step's whole output (one with the completion mark) under ``folder``, atomically.
    ``owner``: the target whose build made it. Older outputs of the same step are pruned per
    owner, so building one target never evicts another's (h100-cuda's op wheel is not
    compiled again for an hour because csc-cuda and cpu were built after it)."""
    stored = _kept(folder)
    if stored.is_dir() or not (made / COMPLETE).is_file():
        return
    stored.parent.mkdir(parents=True, exist_ok=True)
    tmp = stored.with_name(f".{folder}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(made, tmp, symlinks=True, copy_function=link_or_copy)
    write_atomic(_owner_file(folder), owner + "\n")
    os.replace(tmp, stored)
    step = folder.rsplit("-", 1)[0]
    older = sorted(
        (p for p in stored.parent.glob(f"{step}-*") if p.name.rsplit("-", 1)[0] == step and _owner(p.name) == owner),
        key=mtime,
        reverse=True,
    )
    for old in older[KEEP_PER_STEP:]:
        shutil.rmtree(old, ignore_errors=True)
        _owner_file(old.name).unlink(missing_ok=True)


def _owner_file(folder) -> Path:
    return cache_dir() / "kept" / ".owners" / folder


def _owner(folder) -> str:
    try:
        return _owner_file(folder).read_text().strip()
    except OSError:  # stored before owners were recorded
        return ""


def mtime(path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # pruned by a concurrent build: oldest of all
        return 0.0
