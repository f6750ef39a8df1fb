"""Labels only a built GPU image knows, printed as Apptainer's labels file wants them.

`python -m smoke.labels PREFIX` prints `PREFIX.nccl.version 2.29.7`, `PREFIX.cuda.runtime 13.0`
and `PREFIX.cuda.min_driver 580.65.06` (ROCm: `rccl.version`, `rocm.hip`): the NCCL and CUDA
that came with torch, and the oldest driver that CUDA runs on, from the table image.json
carries. The image's %post appends them to $APPTAINER_LABELS; `builder list` shows them.
"""

import sys

from . import config


def measured(torch, image) -> dict:
    version = torch.cuda.nccl.version()
    nccl = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
    if not torch.version.cuda:
        return {"rccl.version": nccl, "rocm.hip": torch.version.hip}
    major = torch.version.cuda.split(".")[0]
    minimums = image.gpu.min_driver if image.gpu else {}
    if major not in minimums:
        raise SystemExit(f"no oldest driver known for CUDA {major}: add it to cuda_min_driver in recipes/versions.yaml")
    return {"nccl.version": nccl, "cuda.runtime": torch.version.cuda, "cuda.min_driver": minimums[major]}


def main(argv=None):
    import torch

    prefix = (argv if argv is not None else sys.argv[1:] or ["org.hpc-ml-containers"])[0]
    for key, value in measured(torch, config.image()).items():
        print(f"{prefix}.{key} {value}")


if __name__ == "__main__":
    main()
