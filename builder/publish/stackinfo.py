"""The versions a published module names in its help: from the image's own recipe label,
and, where a smoke run measured them inside the image, from its report."""

import re

GPU_STACKS = {"cuda": ("CUDA", r"cu(\d+)(\d)$"), "rocm": ("ROCm", r"rocm(\d+\.\d+(?:\.\d+)?)$")}


def stack_versions(recipe: dict, measured: dict) -> tuple:
    """((what, version), ...): torch, DeepSpeed, the GPU stack, the collective library, the
    network plugin, MPI and Python, as far as they are known."""
    torch = recipe.get("torch", {})
    comm = recipe.get("comm", {})
    mpi = recipe.get("mpi", {})
    found = [
        ("torch", measured.get("torch") or torch.get("version")),
        ("DeepSpeed", measured.get("deepspeed") or recipe.get("deepspeed", {}).get("version")),
        *_gpu_stack(torch, measured),
        ("collectives", {"nccl": "NCCL", "rccl": "RCCL", "gloo": "gloo"}.get(comm.get("library"))),
        *_plugin(comm.get("plugin")),
        ("mpi4py", mpi.get("mpi4py") and f"{mpi['mpi4py']} ({mpi.get('abi')} ABI)"),
        ("Python", measured.get("python")),
    ]
    return tuple((what, str(version)) for what, version in found if version)


def _gpu_stack(torch, measured):
    if measured.get("cuda"):
        return [("CUDA", measured["cuda"])]
    if measured.get("hip"):
        return [("ROCm/HIP", measured["hip"])]
    name, pattern = GPU_STACKS.get(torch.get("flavour"), (None, None))
    match = pattern and re.search(pattern, torch.get("index", "").rstrip("/"))
    if not match:
        return []
    return [(name, ".".join(match.groups()))]


def _plugin(plugin):
    return [("network plugin", f"{plugin['name']} {plugin['version']}")] if plugin else []
