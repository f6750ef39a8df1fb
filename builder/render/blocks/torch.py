"""PyTorch from its wheel index, built for the archs of the target's sites.

Emits: "torch", build (the pip install, from the flavour's index when it has one, with the
arch variable set for the later compiles) and final (the arch variable in %environment, a
%test of the version, flavour and collectives).
Reads: target.torch.version (torch.version, else versions.yaml's torch_by_flavour or torch
pin), target.torch.flavour (torch.flavour: cpu, cuda or rocm), target.torch.index
(versions.yaml torch_index for the flavour); target.archs, every site's site.gpu.arch (its
`gpu: arch:`), as TORCH_CUDA_ARCH_LIST or PYTORCH_ROCM_ARCH.

Example, recipes/targets/lumi-rocm.yaml (sites: [lumi]; recipes/sites/lumi.yaml has
`gpu: {arch: [gfx90a]}`):

    torch:
      flavour: rocm

renders (containers/lumi-rocm.devel.def, the case line shortened):

    echo '--- devel: torch'
    export PYTORCH_ROCM_ARCH=gfx90a
    set -- --extra-index-url https://download.pytorch.org/whl/rocm6.4
    case " ${HPCML_PIP_INDEXES_DOWN:-} " in *" $2 "*) ... set -- ;; esac
    pip install --no-cache-dir torch==2.9.1 "$@"
"""

from ... import contract
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
if flavour == "cpu":
    # the plain release on PyPI is a CUDA build: it comes in when the CPU index is left out
    assert not (torch.version.cuda or torch.version.hip), "a GPU build of torch, not the CPU one"
print("torch", torch.__version__, "gloo: yes", "nccl:", dist.is_nccl_available())
"""


def arch_env(target):
    """The variable that tells torch (and DeepSpeed's op builds) which GPU archs to compile."""
    if target.torch.flavour == "cuda":
        # sm_80 -> 8.0, sm_100 -> 10.0
        return (("TORCH_CUDA_ARCH_LIST", ";".join(f"{a[3:-1]}.{a[-1]}" for a in target.archs)),)
    if target.torch.flavour == "rocm":
        return (("PYTORCH_ROCM_ARCH", ";".join(target.archs)),)
    return ()


def extra_index(url) -> list:
    """Lines that set "$@" to `--extra-index-url URL`, or to nothing when the builder found
    URL silent (the host's own indexes or wheels serve then), so that pip does not retry it
    for every package: `python -m builder build` names those in HPCML_PIP_INDEXES_DOWN."""
    return [
        cmd("set", "--", "--extra-index-url", url),
        f'case " ${{{contract.PIP_INDEXES_DOWN}:-}} " in *" $2 "*) '
        f'echo "leaving out $2: it did not answer the builder"; set -- ;; esac',
    ]


def parts(target):
    pip = cmd("pip", "install", "--no-cache-dir", f"torch=={target.torch.version}")
    # An extra index: the wheel's local tag (+cpu, +cu128, +rocm6.4) outranks the plain
    # release on the default index, and dependencies still come from the default index.
    install = [*extra_index(target.torch.index), pip + ' "$@"'] if target.torch.index else [pip]
    return [
        Part(
            block="torch",
            stage="build",
            build_env=arch_env(target),
            post=tuple(install),
            pip_indexes=(target.torch.index,) if target.torch.index else (),
        ),
        Part(
            block="torch",
            stage="final",
            env=arch_env(target),
            test=(python_check("python", _TORCH_CHECK, target.torch.version, target.torch.flavour),),
        ),
    ]
