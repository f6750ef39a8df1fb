"""Where a build writes, whether that fits before it starts, and which folder filled when a
build ran out of space part way.

A build writes in three places: the images folder (each layer's file, written beside its
final name and renamed into it), the build's temporary folder (Apptainer unpacks the layer's
whole tree there, beside our work files) and the user's cache (a link to each layer, or a copy
where the cache is on another file system). The temporary and Apptainer's cache folders are
chosen on purpose: APPTAINER_TMPDIR / APPTAINER_CACHEDIR when the user sets them, else a folder
beside the images and one in the user's cache; never wherever $TMPDIR happens to point (a
small tmpfs on many login nodes).
"""

import errno
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolError
from . import cache

GB = 1e9
# An image layer's unpacked tree against its base layer's file (an uncompressed squashfs,
# about the size of its tree): cpu 1.22, a100-cuda 1.04, v100-cuda 1.02, measured here.
UNPACKED_IMAGE = 1.3
MARGIN = 1.15  # the estimate is of sizes measured before; recipes change
SKIP_HINT = "build with --no-space-check to try all the same"
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
DEFAULT_TMP = ".tmp"  # beside the images, where no APPTAINER_TMPDIR is set


@dataclass(frozen=True)
class Folders:
    images: Path
    tmp: Path  # each build's own folder is made under it and removed after
    apptainer_cache: Path

    def env(self, build_tmp: Path) -> dict:
        """Apptainer's (and SingularityCE's) variables for a build whose folder is build_tmp."""
        return {
            "APPTAINER_TMPDIR": str(build_tmp),
            "SINGULARITY_TMPDIR": str(build_tmp),
            "APPTAINER_CACHEDIR": str(self.apptainer_cache),
            "SINGULARITY_CACHEDIR": str(self.apptainer_cache),
        }

    def named(self):
        return (
            ("the images folder", self.images),
            ("the build's temporary folder", self.tmp),
            ("the user's cache", cache.cache_dir()),
        )


def folders(images: Path) -> Folders:
    env = os.environ
    tmp = env.get("APPTAINER_TMPDIR") or env.get("SINGULARITY_TMPDIR")
    apptainer_cache = env.get("APPTAINER_CACHEDIR") or env.get("SINGULARITY_CACHEDIR")
    return Folders(
        images=images.resolve(),
        tmp=Path(tmp).resolve() if tmp else images.resolve() / DEFAULT_TMP,
        apptainer_cache=Path(apptainer_cache).resolve() if apptainer_cache else cache.cache_dir() / "apptainer",
    )


def existing(path: Path) -> Path:
    """The folder itself or its nearest existing parent: where its files would go."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path: Path) -> int:
    stat = os.statvfs(existing(path))
    return stat.f_bavail * stat.f_frsize


def _device(path: Path) -> int:
    return existing(path).stat().st_dev


def layer_size(target, layer, known: Path, slot: Path) -> float:
    """A layer file's size in bytes: the one built here before (beside the images, else in the
    cache), else the recipe's figure (0 where it has none)."""
    for candidate in [known, *sorted(slot.glob("*.sif"), key=cache.mtime, reverse=True)]:
        try:
            return candidate.stat().st_size
        except OSError:
            continue
    return dict(target.build_space).get(layer, 0) * GB


def needs(plan: dict, sizes: dict, where: Folders) -> dict:
    """{folder: (bytes, what)}, folders on one file system counted together.

    plan: {layer: "build" | "fetch" | "current"}; sizes: {layer: bytes}."""
    built = [layer for layer, step in plan.items() if step == "build"]
    fetched = [layer for layer, step in plan.items() if step == "fetch"]
    want = {where.images: 0.0, where.tmp: 0.0, cache.cache_dir(): 0.0}
    images_dev = _device(where.images)
    want[where.images] += sum(sizes[layer] for layer in built)
    if _device(cache.cache_dir()) != images_dev:
        want[where.images] += sum(sizes[layer] for layer in fetched)  # copied, not linked
        want[cache.cache_dir()] += sum(sizes[layer] for layer in built)
    # one tree at a time: Apptainer removes each layer's tree when its file is written
    trees = [sizes[layer] if layer != "image" else UNPACKED_IMAGE * sizes.get("base", 0) for layer in built]
    want[where.tmp] += max(trees, default=0)
    merged = {}
    for folder, amount in want.items():
        device = _device(folder)
        first = next((f for f in merged if _device(f) == device), folder)
        total, names = merged.get(first, (0.0, []))
        merged[first] = (total + amount, names + [folder])
    return {folder: (amount, names) for folder, (amount, names) in merged.items() if amount}


def check_fits(target_name, plan, sizes, where: Folders):
    """One line, before anything is built, when a folder has less free space than it needs."""
    short = []
    for folder, (amount, names) in needs(plan, sizes, where).items():
        free = free_bytes(folder)
        if amount * MARGIN > free:
            label = " and ".join(_label(where, name) for name in names)
            verb = "need" if len(names) > 1 else "needs"
            short.append(
                f"{label} ({existing(folder)}) {verb} {amount * MARGIN / GB:.2f} GB, {free / GB:.2f} GB free there"
            )
    if short:
        raise ToolError(
            f"not enough disk space to build {target_name}: "
            + "; ".join(short)
            + "; free some, set APPTAINER_TMPDIR to a bigger disk, or "
            + SKIP_HINT
        )


def _label(where, folder):
    return next((label for label, path in where.named() if path == folder), str(folder))


_PATH = re.compile(r"(/[^\s:'\"]+)")


def full_folder(log_text: str, where: Folders):
    """(label, folder) that the log says filled, or None when it does not say space ran out."""
    lines = [
        line
        for line in log_text.splitlines()
        if "no space left on device" in line.lower() or "disk quota exceeded" in line.lower()
    ]
    if not lines:
        return None
    for line in lines:
        for path in reversed(_PATH.findall(line)):  # the one nearest the message: not the command's
            for label, folder in sorted(where.named(), key=lambda item: -len(str(item[1]))):
                if path == str(folder) or path.startswith(str(folder) + "/"):
                    return label, folder
    # no path in the message (mksquashfs says only "No space left on device"): the fullest
    return min(((label, folder) for label, folder in where.named()), key=lambda item: free_bytes(item[1]))


def ran_out(label, folder) -> str:
    return f"ran out of disk space in {label} ({existing(folder)}, {free_bytes(folder) / GB:.2f} GB free now)"


@contextmanager
def naming_full(label, folder):
    """A full disk while this block copies into ``folder``: one line naming it."""
    try:
        yield
    except OSError as error:
        if error.errno not in FULL_ERRNOS:
            raise
        raise ToolError(ran_out(label, folder) + "; the previous image is unchanged") from None
