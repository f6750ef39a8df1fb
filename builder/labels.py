"""The names of an image's labels, written by the provenance block at render time, and the one
reader of them in a built image (`ImageLabels`): host.images takes them from `apptainer
inspect`, export.metadata from the SIF's /.singularity.d/labels.json, the same JSON object."""

import datetime
import json
from dataclasses import dataclass

from .errors import ToolError

LABEL_PREFIX = "org.hpc-ml-containers"
# Labels only the built image knows: the NCCL (RCCL) and CUDA (HIP) that came with torch, and
# the oldest driver that CUDA runs on (runtime/smoke/labels.py); the provenance block's %post
# appends them to the labels Apptainer writes.
MEASURED = ("nccl.version", "cuda.runtime", "cuda.min_driver", "rccl.version", "rocm.hip")
BUILD_DATE = "org.label-schema.build-date"  # Apptainer's own: Friday_27_November_2026_4:59:33_UTC
LABELS_FILE = ".singularity.d/labels.json"  # where Apptainer writes them in the image


def build_date(value: str):
    """Apptainer's build-date label as a UTC datetime; None when absent or not in its form."""
    try:
        parsed = datetime.datetime.strptime(value, "%A_%d_%B_%Y_%H:%M:%S_UTC")
    except ValueError:
        return None
    return parsed.replace(tzinfo=datetime.UTC)


@dataclass(frozen=True)
class ImageLabels:
    """A built image's labels. Example: ImageLabels.from_json_text('{"org.hpc-ml-containers.target":
    "cpu"}', "cpu.sif").short("target") == "cpu"."""

    full: dict  # {name: value} as the image writes them (org.hpc-ml-containers.version.torch), by name

    @classmethod
    def from_json_text(cls, text: str, image, source=f"/{LABELS_FILE}") -> "ImageLabels":
        """The labels in ``text``, a JSON object of them ('' holds none); one line naming the
        image and ``source`` (where the text came from) when it is not one."""
        try:
            labels = json.loads(text or "{}")
        except ValueError:
            raise ToolError(f"{image}: {source} is not JSON") from None
        if not isinstance(labels, dict):
            raise ToolError(f"{image}: {source} is not a JSON object of labels")
        return cls._of(labels)

    @classmethod
    def from_inspect(cls, text: str, image, apptainer) -> "ImageLabels":
        """The labels in what `apptainer inspect --json --labels IMAGE` printed (the same object,
        as its data.attributes.labels); one line when it holds none."""
        try:
            labels = json.loads(text)["data"]["attributes"]["labels"]
        except (ValueError, KeyError, TypeError):
            labels = None
        if not isinstance(labels, dict):
            raise ToolError(f"{apptainer} inspect gave no labels for {image}")
        return cls._of(labels)

    @classmethod
    def _of(cls, labels: dict) -> "ImageLabels":
        return cls({str(name): str(value) for name, value in sorted(labels.items())})

    def short(self, name: str) -> str:
        """One of the project's own labels by its short name (`version.torch`); '' when absent."""
        return self.full.get(f"{LABEL_PREFIX}.{name}", "")

    @property
    def stripped(self) -> dict:
        """Every label, the project's less their prefix (`version.torch`, `recipe`, ...) and
        the others (Apptainer's `org.label-schema.*`) by their full names."""
        prefix = LABEL_PREFIX + "."
        return {name.removeprefix(prefix): value for name, value in self.full.items()}

    @property
    def recipe(self) -> dict:
        """The resolved recipe the provenance block embeds; {} when absent or not a JSON object."""
        try:
            recipe = json.loads(self.short("recipe") or "{}")
        except ValueError:
            return {}
        return recipe if isinstance(recipe, dict) else {}

    @property
    def flavour(self) -> str:
        """cpu, cuda or rocm: the torch build the image holds, from its recipe; '' when unknown."""
        torch = self.recipe.get("torch")
        return str(torch.get("flavour", "")) if isinstance(torch, dict) else ""
