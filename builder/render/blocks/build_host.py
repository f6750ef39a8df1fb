"""Let %post use the build host's CA bundle and pip settings without baking them in.

`python -m builder build` binds a directory at /mnt for %post only; its settings file exports
the CA bundle and pip's indexes and local wheels. /mnt is not part of the image, so nothing of
the host stays in it. Without that file (a plain `apptainer build`) nothing changes.
"""

from ..parts import HOST_MOUNT, Part

SETTINGS = f"{HOST_MOUNT}/hpcml-build-host.sh"


def parts(target):
    lines = ("# shellcheck source=/dev/null  # present only while `builder build` runs",
             f"if [ -r {SETTINGS} ]; then . {SETTINGS}; fi")
    return [Part(block="build_host", stage=stage, post=lines) for stage in ("build", "final")]
