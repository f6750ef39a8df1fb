"""The SBOM beside each built image: images/<target>.sbom.json, CycloneDX 1.6 JSON, made
from what the image holds (inventory) when the build ends, and again only when the image's
layer key changes. `publish` places it beside the published image and names it in the module.

Example: ensure(target, Path("images/cpu.sif"), key) -> Path("images/cpu.sbom.json"). It also
proves the image holds the target's lock (lock_check): a build that put in anything else fails.
"""

import dataclasses
import json
from pathlib import Path

from ..errors import ToolError
from ..fileio import write_atomic
from ..host import cache
from ..host.images import read_labels
from ..host.which_apptainer import ready_apptainer
from ..lockfile import PythonLock
from . import inventory, lock_check, rootfs

SUFFIX = ".sbom.json"
PYENV_SUFFIX = ".sqsh"  # a project env's file (hpcml env build)
PUBLISHED = "sbom.cdx.json"  # its name beside a published image
PROPERTY = "hpcml:"  # our properties' namespace in the document
KEY_PROPERTY = PROPERTY + "layer-key"  # the image layer key it was made for
OP_PROPERTY = PROPERTY + "deepspeed:op"  # one per compiled op, on DeepSpeed's component
ROOTFS_PROPERTY = PROPERTY + "rootfs-digest"  # sbom/rootfs.py's digest of the image's files
MAX_SHOWN = 8  # differences named in the error; the SBOM beside the image has them all


def path_for(image: Path, suffix: str = ".sif") -> Path:
    """images/cpu.sif -> images/cpu.sbom.json"""
    return image.with_name(image.name.removesuffix(suffix) + SUFFIX)


def pyenv_path_for(env: Path) -> Path:
    """A project env's file -> its SBOM beside it: requirements.cpu.sqsh -> requirements.cpu.sbom.json"""
    return path_for(env, PYENV_SUFFIX)


def recorded_key(sbom: Path):
    """The image layer key an SBOM file was made for; None when absent or unreadable."""
    try:
        properties = json.loads(sbom.read_text())["metadata"]["component"]["properties"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return next((p.get("value") for p in properties if p.get("name") == KEY_PROPERTY), None)


def ensure(target, image: Path, key: str, progress=None, apptainer=None, proot=None) -> Path:
    """The image's SBOM, made (atomically) unless the one beside it was made for this key;
    apptainer: the command that reads the image (default: the one installed, or the toolbox);
    proot: read it unpacked, under this proot, where Apptainer can make no user namespace."""
    sbom = path_for(image)
    if recorded_key(sbom) == key:
        return _holds_its_lock(target, image, sbom)
    if cache.fetch_sbom(target.name, key, sbom) and recorded_key(sbom) == key:
        if progress:
            progress.step(f"took {sbom} from the cache (made of this image layer, key {key[:12]})")
        return _holds_its_lock(target, image, sbom)
    from . import document  # cyclonedx: 80 ms, paid only by a build that writes an SBOM

    apptainer = apptainer or ready_apptainer(target.sites[0])
    labels = read_labels(apptainer, image).stripped
    venv = target.python.venv
    contents = None if proot else inventory.read(apptainer, image, venv)
    with rootfs.unpacked(apptainer, image) as root:
        contents = contents or inventory.read_unpacked(proot, root, venv, image)
        files = rootfs.digest(rootfs.listing(root))  # the CPU image: 10 s
        record = rootfs.file_text(root, wheel_record(target.python.venv))
    contents = dataclasses.replace(contents, wheels=inventory.built_wheels(record))
    write_atomic(sbom, document.render(target, key, labels, contents, files))
    cache.store_sbom(target.name, key, sbom)
    if progress:
        progress.step(
            f"wrote {sbom}: {len(contents.debs)} Debian packages, {len(contents.dists)} Python "
            f"distributions, {len(contents.ops)} DeepSpeed ops (CycloneDX 1.6)"
        )
    return _holds_its_lock(target, image, sbom)


def wheel_record(venv: str) -> str:
    """Where an image records the sha256 of the DeepSpeed wheel it built and installed."""
    from ..render.blocks.deepspeed import RECORD_DIR, WHEEL_RECORD  # the blocks: 0.1 s, paid here only

    return f"{venv}/{RECORD_DIR}/{WHEEL_RECORD}"


def _holds_its_lock(target, image: Path, sbom: Path) -> Path:
    """``sbom``, once it shows that the image holds exactly the target's locks (those it has:
    Python, and the final stage's Debian packages); else a ToolError listing what differs
    (the SBOM stays: it says what the image is)."""
    lock = target.python_lock
    if isinstance(lock, PythonLock):
        _refuse(image, sbom, lock.path, "Python distributions", lock_check.differences(sbom, lock))
    final = next((deb for deb in target.debian_locks if deb.stage == "final"), None)
    if final is not None:
        _refuse(image, sbom, final.path, "Debian packages", lock_check.deb_differences(sbom, final))
    return sbom


def _refuse(image, sbom, lock_path, what, found):
    if found:
        more = f"; and {len(found) - MAX_SHOWN} more" if len(found) > MAX_SHOWN else ""
        raise ToolError(
            f"{image} does not hold its lock {lock_path} ({len(found)} {what} differ, its SBOM {sbom} lists "
            f"them): {'; '.join(found[:MAX_SHOWN])}{more}"
        )
