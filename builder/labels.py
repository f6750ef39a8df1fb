"""The names of an image's labels: written by the provenance block at render time, read back
from a built image by host.images."""

import datetime

LABEL_PREFIX = "org.hpc-ml-containers"
# Labels only the built image knows: the NCCL (RCCL) and CUDA (HIP) that came with torch, and
# the oldest driver that CUDA runs on (runtime/smoke/labels.py); the provenance block's %post
# appends them to the labels Apptainer writes.
MEASURED = ("nccl.version", "cuda.runtime", "cuda.min_driver", "rccl.version", "rocm.hip")
BUILD_DATE = "org.label-schema.build-date"  # Apptainer's own: Friday_27_November_2026_4:59:33_UTC


def build_date(value: str):
    """Apptainer's build-date label as a UTC datetime; None when absent or not in its form."""
    try:
        parsed = datetime.datetime.strptime(value, "%A_%d_%B_%Y_%H:%M:%S_UTC")
    except ValueError:
        return None
    return parsed.replace(tzinfo=datetime.UTC)
