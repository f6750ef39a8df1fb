"""`hpcml export TARGET --format oci|enroot|edf`: the checks first (one line, exit 2, nothing
written), then the formats in the order they need each other (the EDF names the squashfs),
each written beside its final name and renamed into it only once all of them are made; a
failed or interrupted export leaves the previous files as they were."""

import fcntl
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import RecipeError, ToolError
from ..host import sif
from ..host.images import built_image, checked_labels, image_lock
from ..host.which_apptainer import ready_apptainer
from ..invocation import hint
from . import edf, enroot, metadata, oci

# Also the order they are made in: the OCI layer before enroot adds to the unpacked
# /etc/environment, the squashfs before the EDF that names it.
FORMATS = ("oci", "enroot", "edf")
SUFFIXES = {"oci": ".oci.tar", "enroot": ".sqsh", "edf": ".toml"}
UNPACKED = ("oci", "enroot")  # the formats made from the unpacked root filesystem


@dataclass(frozen=True)
class ExportRequest:
    target: str
    formats: tuple
    images: Path
    image_path: str = ""  # where the squashfs will be on the site, for the EDF (default: its path here)


def output(images: Path, target: str, form: str) -> Path:
    return images / f"{target}{SUFFIXES[form]}"


def export(tree, request: ExportRequest, progress) -> dict:
    """{format: path written}."""
    formats = [form for form in FORMATS if form in request.formats]
    unknown = sorted(set(request.formats) - set(FORMATS))
    if unknown or not formats:
        named = ", ".join(map(repr, unknown or request.formats))
        raise RecipeError(f"--format {named}: expected one or more of {', '.join(FORMATS)}", file="command line")
    if request.image_path:
        check_image_path(request.image_path)
    built = built_image(tree, request.target, request.images)
    name, images = built.target.name, request.images
    outputs = {form: output(images, name, form) for form in formats}
    squashfs = output(images, name, "enroot")
    if "edf" in formats and "enroot" not in formats and not squashfs.is_file():
        make = hint(f"make export TARGET={name} FORMAT=enroot", f"export {name} --format enroot --images {images}")
        raise RecipeError(f"no squashfs for the EDF to name; export it first with: {make}", file=str(squashfs))
    if any(form in UNPACKED for form in formats) and os.geteuid() != 0:
        raise ToolError(
            "export --format oci or enroot unpacks the image's root filesystem with its owners: run it as root"
        )
    apptainer = ready_apptainer(built.site)
    checked_labels(apptainer, built)
    with image_lock(images, name, shared=True), _export_lock(images, name):
        _remove_stale(images, name)
        work = Path(tempfile.mkdtemp(prefix=f".{name}.export-", dir=images))
        temps = {}
        try:
            log = images / f"{name}.export.log"
            log.write_text("")
            partition = sif.root_partition(apptainer, built.path)
            meta = metadata.read(partition, name)
            rootfs = work / "rootfs"
            if any(form in UNPACKED for form in formats):
                progress.step(
                    f"unpacking the root filesystem of {built.path} ({partition.size / 1e6:.0f} MB; log: {log})"
                )
                sif.unpack(partition, rootfs, log)
            for form in formats:
                temps[form] = outputs[form].with_name(f".{outputs[form].name}.tmp-{os.getpid()}")
                progress.step(f"writing {outputs[form]}")
                if form == "oci":
                    oci.write(rootfs, meta, work, temps[form], log)
                elif form == "enroot":
                    enroot.write(rootfs, meta, temps[form], log)
                else:
                    image = request.image_path or edf.literal(str(squashfs.resolve()))
                    temps[form].write_text(edf.text(meta, image))
            for form in formats:  # all made: now each replaces the previous one
                os.chmod(temps[form], 0o644)
                os.replace(temps[form], outputs[form])
        finally:
            for temp in temps.values():
                temp.unlink(missing_ok=True)
            shutil.rmtree(work, ignore_errors=True)
    for form in formats:
        progress.step(f"exported {outputs[form]} ({outputs[form].stat().st_size / 1e6:.1f} MB)")
    return outputs


def check_image_path(path: str):
    """--image-path: an absolute path on the site, or one starting with a variable the
    Container Engine expands there (${SCRATCH}/images/cpu.sqsh)."""
    if not (path.startswith("/") or path.startswith("${")) or any(ord(char) < 0x20 for char in path):
        raise RecipeError(
            f"--image-path {path!r}: expected an absolute path on the site (or one starting with "
            "${VARIABLE}, such as ${SCRATCH}/images/cpu.sqsh)",
            file="command line",
        )


def _export_lock(images: Path, name):
    return _Lock(images / f".{name}.export.lock", name)


class _Lock:
    """One export of a target at a time: the second stops at once with one line."""

    def __init__(self, path: Path, name):
        self.path, self.name, self.handle = path, name, None

    def __enter__(self):
        self.handle = open(self.path, "a")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.close()
            raise ToolError(f"{self.name}: another export of it is running (lock {self.path})") from None
        return self

    def __exit__(self, *exc):
        self.handle.close()


def _remove_stale(images: Path, name):
    """What a killed export left: its work folder and its temporary outputs (the lock is held:
    no other export of this target is using them)."""
    for stale in images.glob(f".{name}.export-*"):
        shutil.rmtree(stale, ignore_errors=True)
    for suffix in SUFFIXES.values():
        for stale in images.glob(f".{name}{suffix}.tmp-*"):
            stale.unlink(missing_ok=True)
