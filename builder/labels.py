"""The names of an image's labels: written by the provenance block at render time, read back
from a built image by host.images."""

LABEL_PREFIX = "org.hpc-ml-containers"
# Labels only the built image knows: the NCCL (RCCL) and CUDA (HIP) that came with torch, and
# the oldest driver that CUDA runs on (runtime/smoke/labels.py); the provenance block's %post
# appends them to the labels Apptainer writes.
MEASURED = ("nccl.version", "cuda.runtime", "cuda.min_driver", "rccl.version", "rocm.hip")
