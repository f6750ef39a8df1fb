"""Let %post use the build host's CA bundle and pip settings without baking them in.

`python -m builder build` binds a directory at /mnt for %post only; its settings file exports
the CA bundle, pip's indexes and local wheels. Nothing of the host stays in the image; without
the file (a plain `apptainer build`) nothing changes.

Emits: "build_host", build and final (first in every layer's %post): %post lines only.
Reads: nothing of the target or its sites; the same lines in every image.

Example, every target (containers/cpu.devel.def):

    echo '--- devel: build_host'
    # shellcheck source=/dev/null  # present only while `builder build` runs
    if [ -r /mnt/hpcml-build-host.sh ]; then . /mnt/hpcml-build-host.sh; fi
"""

from ...recipes.target_model import Target
from ..parts import HOST_SETTINGS, Part


def parts(target: Target):
    lines = (
        "# shellcheck source=/dev/null  # present only while `builder build` runs",
        f"if [ -r {HOST_SETTINGS} ]; then . {HOST_SETTINGS}; fi",
    )
    return [Part(block="build_host", stage=stage, post=lines) for stage in ("build", "final")]
