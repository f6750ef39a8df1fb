"""What the formats carry besides the files, read from the image itself: the environment
Apptainer gives it (`/.singularity.d/env/90-environment.sh`, the definition's %environment), its
labels (`/.singularity.d/labels.json`, what `apptainer inspect --labels` shows), when it was
built, and the OCI annotations these map to."""

import calendar
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import runner
from ..errors import ToolError
from ..host import sif
from ..labels import BUILD_DATE, LABELS_FILE, ImageLabels
from ..labels import build_date as label_time

ENVIRONMENT_FILE = ".singularity.d/env/90-environment.sh"
# The PATH docker and podman give a container whose image sets none: the base that the
# image's `export PATH="/opt/venv/bin:${PATH}"` extends, as Apptainer's own default does.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BUILD_ARCH = "org.label-schema.build-arch"
_SPLIT = "--hpcml-export-after--"  # between the environment before and after the image's script


@dataclass(frozen=True)
class ImageMetadata:
    target: str
    environment: dict  # PATH first, then what the image sets, by name
    image_labels: ImageLabels

    @property
    def labels(self) -> dict:
        """As the image names them (org.hpc-ml-containers.version.torch, ...): what an OCI
        config's labels carry."""
        return self.image_labels.full

    @property
    def created(self) -> str:
        """The build date as RFC 3339 (UTC), or '' when the image has no build-date label."""
        return build_date(self.labels.get(BUILD_DATE, ""))


def read(partition: sif.Partition, target: str) -> ImageMetadata:
    labels = ImageLabels.from_json_text(sif.read_file(partition, LABELS_FILE), partition.image)
    return ImageMetadata(target, environment(sif.read_file(partition, ENVIRONMENT_FILE)), labels)


def environment(script: str) -> dict:
    """What ``script`` (an image's 90-environment.sh) exports, as Apptainer's shell would: it is
    sourced by `sh` in an environment holding only PATH=DEFAULT_PATH, and the variables it
    sets or changes are kept. PATH comes first and is always there (OCI images carry theirs)."""
    env_program = shutil.which("env") or "/usr/bin/env"  # by path: the script may change PATH
    with tempfile.TemporaryDirectory(prefix="hpcml-env-") as folder:
        path = Path(folder) / "environment.sh"
        path.write_text(script)
        shell = f'"$2" -0; printf "%s\\0" "{_SPLIT}"; . "$1" >/dev/null; "$2" -0'
        result = runner.run(
            ["sh", "-c", shell, "sh", str(path), env_program], env={"PATH": DEFAULT_PATH}, cwd=folder, timeout=60
        )
    items = result.stdout.split("\0")
    if _SPLIT not in items:
        raise ToolError("the image's environment script gave no environment")
    cut = items.index(_SPLIT)
    old, new = _variables(items[:cut]), _variables(items[cut + 1 :])
    changed = {name: value for name, value in sorted(new.items()) if old.get(name) != value and name != "PATH"}
    return {"PATH": new.get("PATH", DEFAULT_PATH), **changed}


def _variables(items) -> dict:
    return dict(item.split("=", 1) for item in items if "=" in item)


def build_date(label: str) -> str:
    """Apptainer's build-date label as RFC 3339 (2026-11-27T04:57:38Z); '' when not in its form."""
    when = label_time(label)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else ""


def epoch(created: str):
    """Seconds since 1970 of an RFC 3339 time from `build_date`; None for ''."""
    return calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")) if created else None


def annotations(meta: ImageMetadata) -> dict:
    """The image's labels as OCI annotations, and the `org.opencontainers.image.*` ones whose
    value the image knows (the OCI image spec's pre-defined annotation keys)."""
    known = {
        "org.opencontainers.image.title": meta.target,
        "org.opencontainers.image.version": meta.image_labels.short("version.torch"),
        "org.opencontainers.image.created": meta.created,
        "org.opencontainers.image.description": str(meta.image_labels.recipe.get("description", "")),
    }
    return {**meta.labels, **{key: value for key, value in known.items() if value}}
