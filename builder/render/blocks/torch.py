"""PyTorch from its wheel index, built for the archs of the target's sites.

Emits: "torch", build (the pip install, from the target's index where it names one, with the
arch variable set for the later compiles, then a check of the version, flavour and
collectives, so a wrong torch fails the layer that installed it) and final (the arch variable
in %environment, the same check as %test).
Reads: target.torch.version (torch.version, else versions.yaml's torch pin), .flavour (cpu,
cuda or rocm), .index (the versions.yaml torch_index entry torch.index names, else the
flavour's); target.archs, every site's `gpu: arch:` (site.gpu.arch), as TORCH_CUDA_ARCH_LIST
or PYTORCH_ROCM_ARCH.

Example, recipes/targets/lumi-rocm.yaml, `torch: {flavour: rocm, version: 2.10.0, index:
rocm7.0}`, for its site lumi (`gpu: arch: [gfx90a]`), renders (containers/lumi-rocm.devel.def,
shortened):

    echo '--- devel: torch'
    export PYTORCH_ROCM_ARCH=gfx90a
    set -- --extra-index-url https://download.pytorch.org/whl/rocm7.0
    case " ${HPCML_PIP_INDEXES_DOWN:-} " in *" $2 "*) ... set -- ;; esac
    pip install --no-cache-dir torch==2.10.0 "$@"
    python -c '...' 2.10.0 rocm
"""

from ... import contract
from ...recipes.target_model import Target
from ...values.shell import cmd, python_check
from ..parts import Part
from ..pip_install import Request, lines

# Run where torch is installed and again in %test: a wrong torch (the CUDA build from PyPI
# where the CPU or ROCm index was left out) fails that very layer, in one marked line.
_TORCH_CHECK = """
import sys
import torch
import torch.distributed as dist
version, flavour = sys.argv[1:3]
built = torch.__version__
wrong = []
if built.split("+")[0] != version:
    wrong.append(f"torch {built} is installed")
if not (dist.is_available() and dist.is_gloo_available()):
    wrong.append("torch.distributed has no gloo")
if flavour == "cuda" and not (torch.version.cuda and dist.is_nccl_available()):
    wrong.append(f"torch {built} was not built with CUDA and NCCL")
if flavour == "rocm" and not (torch.version.hip and dist.is_nccl_available()):
    wrong.append(f"torch {built} was not built with ROCm and RCCL")
# the plain release on PyPI is a CUDA build: it comes in when the CPU index is left out
if flavour == "cpu" and (torch.version.cuda or torch.version.hip):
    wrong.append(f"torch {built} is a GPU build")
if wrong:
    reasons = "; ".join(wrong)
    sys.exit(f"MARKER{reasons}; expected torch {version} built for {flavour}")
print("torch", built, "gloo: yes", "nccl:", dist.is_nccl_available())
""".replace("MARKER", contract.FAILURE_MARKER)


def arch_env(target: Target):
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


def parts(target: Target):
    request = Request("torch", (f"torch=={target.torch.version}",), index=target.torch.index or "")
    # An extra index: the wheel's local tag (+cpu, +cu128, +rocm6.4) outranks the plain
    # release on the default index, and dependencies still come from the default index.
    if target.torch.index:
        install = [*extra_index(target.torch.index), *lines(target, request, tail='"$@"')]
    else:
        install = lines(target, request)
    check = python_check("python", _TORCH_CHECK, target.torch.version, target.torch.flavour)
    return [
        Part(
            block="torch",
            stage="build",
            build_env=arch_env(target),
            post=(*install, check),
            pip_indexes=(target.torch.index,) if target.torch.index else (),
        ),
        Part(
            block="torch",
            stage="final",
            env=arch_env(target),
            test=(check,),
        ),
    ]
