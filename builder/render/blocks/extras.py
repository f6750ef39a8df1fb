"""The target's extra Python packages, pinned in versions.yaml; a top-layer block, so adding
one rebuilds neither the OS nor torch.

Emits: "extras", build only (one pip install into the venv, which the final stage copies);
nothing when the target lists none.
Reads: target.python.packages (python.packages, each at its versions.yaml python_packages
pin). No site fields.

Example, recipes/targets/lumi-rocm.yaml (`python.packages: [numpy, matplotlib]`) renders
(containers/lumi-rocm.def):

    echo '--- build: extras'
    pip install --no-cache-dir numpy==2.4.6 matplotlib==3.11.2
"""

from ...recipes.target_model import Target
from ..parts import Part
from ..pip_install import Request, lines


def parts(target: Target):
    if not target.python.packages:
        return []
    pins = [f"{name}=={version}" for name, version in target.python.packages]
    return [Part(block="extras", stage="build", post=tuple(lines(target, Request("extras", tuple(pins)))))]
