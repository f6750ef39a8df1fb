"""PyTorch from its wheel index, built for the archs of the target's sites."""

from ...shell import cmd, python_check
from ..parts import Part

_TORCH_CHECK = """
import sys
import torch
import torch.distributed as dist
version, flavour = sys.argv[1:3]
found = torch.__version__.split("+")[0]
assert found == version, f"torch {found}, expected {version}"
assert dist.is_available() and dist.is_gloo_available(), "torch.distributed without gloo"
if flavour == "cuda":
    assert torch.version.cuda, "torch was not built with CUDA"
    assert dist.is_nccl_available(), "torch.distributed without NCCL"
if flavour == "rocm":
    assert torch.version.hip, "torch was not built with ROCm"
    assert dist.is_nccl_available(), "torch.distributed without RCCL"
print("torch", torch.__version__, "gloo: yes", "nccl:", dist.is_nccl_available())
"""


def arch_env(target):
    """The variable that tells torch (and DeepSpeed's op builds) which GPU archs to compile."""
    if target.torch_flavour == "cuda":
        # sm_80 -> 8.0, sm_100 -> 10.0
        return (("TORCH_CUDA_ARCH_LIST", ";".join(f"{a[3:-1]}.{a[-1]}" for a in target.archs)),)
    if target.torch_flavour == "rocm":
        return (("PYTORCH_ROCM_ARCH", ";".join(target.archs)),)
    return ()


def parts(target):
    install = ["pip", "install", "--no-cache-dir", f"torch=={target.torch_version}"]
    if target.torch_index:
        # An extra index: the wheel's local tag (+cpu, +cu128, +rocm6.4) outranks the plain
        # release on the default index, and dependencies still come from the default index.
        install += ["--extra-index-url", target.torch_index]
    return [
        Part(block="torch", stage="build", build_env=arch_env(target), post=(cmd(*install),)),
        Part(block="torch", stage="final", env=arch_env(target),
             test=(python_check("python", _TORCH_CHECK, target.torch_version, target.torch_flavour),)),
    ]
