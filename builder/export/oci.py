"""The OCI image archive: umoci makes an OCI layout whose one layer is the image's root
filesystem, and whose config and manifest carry its environment, labels and annotations; tar
packs that layout as an oci-archive (what `podman load` and `skopeo ... oci-archive:FILE` read).

GNU tar rather than `skopeo copy oci: oci-archive:`: with sorted names, fixed owners and the
build date as every mtime, the same image gives the same archive, byte for byte; skopeo stamps
the time of the copy and keeps a blob cache under /var/lib/containers when run as root.
"""

from pathlib import Path

from .. import runner
from . import metadata

LAYOUT_FILES = ("oci-layout", "index.json", "blobs")  # an OCI image layout, as the spec lays it out
RUNSCRIPT = ".singularity.d/runscript"  # what `apptainer run` runs: the definition's %runscript


def write(rootfs: Path, meta: metadata.ImageMetadata, work: Path, out: Path, log: Path):
    """The archive of ``rootfs`` at ``out``; ``work`` holds the layout meanwhile."""
    layout = work / "oci"
    image = f"{layout}:{meta.target}"  # the tag becomes the archive's ref name: podman loads localhost/<target>
    created = meta.created
    dated = ["--history.created", created] if created else []

    def umoci(*args, what):
        runner.run_logged(["umoci", *args], log, what=what)

    umoci("init", "--layout", str(layout), what="umoci init")
    umoci("new", "--image", image, what="umoci new")
    umoci(
        "insert",
        "--image",
        image,
        *dated,
        "--history.created_by",
        f"hpcml export {meta.target} --format oci",
        "--history.comment",
        f"the root filesystem of {meta.target}.sif",
        str(rootfs),
        "/",
        what="umoci insert (the root filesystem as one layer)",
    )
    umoci("config", "--image", image, "--no-history", *config_args(meta, rootfs), what="umoci config")
    umoci("gc", "--layout", str(layout), what="umoci gc")  # drops the blobs of the steps before
    seconds = metadata.epoch(created) or 0
    runner.run_logged(
        [
            "tar",
            "--sort=name",
            f"--mtime=@{seconds}",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "--mode=u+rwX,go+rX,go-w",
            "-C",
            str(layout),
            "-cf",
            str(out),
            *LAYOUT_FILES,
        ],
        log,
        what="packing the OCI archive",
    )


def config_args(meta: metadata.ImageMetadata, rootfs: Path) -> list:
    """umoci config's arguments: the image's environment, its runscript as the entrypoint (so
    `podman run IMAGE ARGS` does what `apptainer run IMAGE ARGS` does), its labels as config
    labels, the annotations on the manifest, its build date and architecture."""
    args = ["--os", "linux"]
    runscript = rootfs / RUNSCRIPT
    if not runscript.is_symlink() and runscript.is_file():
        args += ["--config.entrypoint", f"/{RUNSCRIPT}"]
    if meta.created:
        args += ["--created", meta.created]
    arch = meta.labels.get(metadata.BUILD_ARCH)
    if arch:
        args += ["--architecture", arch]
    for name, value in meta.environment.items():
        args += ["--config.env", f"{name}={value}"]
    for name, value in meta.labels.items():
        args += ["--config.label", f"{name}={value}"]
    for name, value in metadata.annotations(meta).items():
        args += ["--manifest.annotation", f"{name}={value}"]
    return args
