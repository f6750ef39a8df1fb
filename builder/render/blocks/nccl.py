"""NCCL as torch's CUDA wheels bundle it: nothing to install, a check that torch finds it.

The target's collective library (comm.library, fixed by the torch flavour) is one of three:
gloo (CPU images) needs no block, nccl is this one, rccl is the rccl_ofi block (on libfabric).

Emits: "nccl", final only (CUDA images): a %test printing the NCCL version and a %help line.
Reads: target.comm.library (comm.library). No site fields: NCCL's network (InfiniBand through
the verbs packages of the target's os.packages.final) is the host's.

Example, recipes/targets/a100-cuda.yaml, `comm: {library: nccl}`, renders
(containers/a100-cuda.def):

    echo '--- test: nccl'
    python -c 'import torch
    version = torch.cuda.nccl.version()
    print("NCCL", ".".join(map(str, version)) if isinstance(version, tuple) else version)
    '
"""

from ...recipes.target_model import Target
from ...values.shell import python_check
from ..parts import Part

_NCCL_CHECK = """
import torch
version = torch.cuda.nccl.version()
print("NCCL", ".".join(map(str, version)) if isinstance(version, tuple) else version)
"""


def parts(target: Target):
    if target.comm.library != "nccl":
        return []
    return [
        Part(
            block="nccl",
            stage="final",
            test=(python_check("python", _NCCL_CHECK),),
            help=("NCCL: the version bundled with the torch wheel.",),
        )
    ]
