"""The OCI image archive: umoci makes an OCI layout whose one layer is the image's root
filesystem, and whose config and manifest carry its environment, labels and annotations; tar
packs that layout as an oci-archive (what `podman load` and `skopeo ... oci-archive:FILE` read).

GNU tar rather than `skopeo copy oci: oci-archive:`: with sorted names, fixed owners and the
build date as every mtime, the same image gives the same archive, byte for byte; skopeo stamps
the time of the copy and keeps a blob cache under /var/lib/containers when run as root.
"""

from pathlib import Path

from .. import runner
from . import facts as image_facts

LAYOUT_FILES = ("oci-layout", "index.json", "blobs")  # an OCI image layout, as the spec lays it out
RUNSCRIPT = ".singularity.d/runscript"  # what `apptainer run` runs: the definition's %runscript


def write(rootfs: Path, facts: image_facts.ImageFacts, work: Path, out: Path, log: Path):
    """The archive of ``rootfs`` at ``out``; ``work`` holds the layout meanwhile."""
    layout = work / "oci"
    image = f"{layout}:{facts.target}"  # the tag becomes the archive's ref name: podman loads localhost/<target>
    created = facts.created
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
        f"hpcml export {facts.target} --format oci",
        "--history.comment",
        f"the root filesystem of {facts.target}.sif",
        str(rootfs),
        "/",
        what="umoci insert (the root filesystem as one layer)",
    )
    umoci("config", "--image", image, "--no-history", *config_args(facts, rootfs), what="umoci config")
    umoci("gc", "--layout", str(layout), what="umoci gc")  # drops the blobs of the steps before
    seconds = image_facts.epoch(created) or 0
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


def config_args(facts: image_facts.ImageFacts, rootfs: Path) -> list:
    """umoci config's arguments: the image's environment, its runscript as the entrypoint (so
    `podman run IMAGE ARGS` does what `apptainer run IMAGE ARGS` does), its labels as config
    labels, the annotations on the manifest, its build date and architecture."""
    args = ["--os", "linux"]
    runscript = rootfs / RUNSCRIPT
    if not runscript.is_symlink() and runscript.is_file():
        args += ["--config.entrypoint", f"/{RUNSCRIPT}"]
    if facts.created:
        args += ["--created", facts.created]
    arch = facts.labels.get(image_facts.BUILD_ARCH)
    if arch:
        args += ["--architecture", arch]
    for name, value in facts.environment.items():
        args += ["--config.env", f"{name}={value}"]
    for name, value in facts.labels.items():
        args += ["--config.label", f"{name}={value}"]
    for name, value in image_facts.annotations(facts).items():
        args += ["--manifest.annotation", f"{name}={value}"]
    return args
