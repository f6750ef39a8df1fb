"""The higher-level frameworks users start from: Lightning, Hugging Face transformers,
accelerate and datasets, at the versions.yaml pins, in the top layer (so adding or bumping
them rebuilds neither the OS nor torch). Each sets itself up for distributed training from
the launcher's variables (torchrun's, Slurm's, or launchenv's), so the image needs nothing
else for them.

Emits: "frameworks", build (one pip install) and final (a %test that each imports at its pin,
a %help line); nothing when the target goes without.
Reads: target.python.frameworks (python.frameworks: true by default for GPU targets, false
for cpu; the versions come from versions.yaml `frameworks`). No site fields.

Example, recipes/targets/cpu.yaml:

    python:
      frameworks: true                # off by default for cpu; on here, where the tests run them

renders (containers/cpu.def):

    echo '--- build: frameworks'
    pip install --no-cache-dir lightning==2.6.6 transformers==5.23.0 accelerate==1.15.0 datasets==5.2.0
    ...
    echo '--- test: frameworks'
    python -m smoke.imports lightning==2.6.6 transformers==5.23.0 accelerate==1.15.0 datasets==5.2.0

`frameworks: false` leaves the block out.
"""

from ...shell import cmd
from ..parts import Part


def parts(target):
    if not target.python.frameworks:
        return []
    pins = [f"{name}=={version}" for name, version in target.python.frameworks]
    return [
        Part(block="frameworks", stage="build", post=(cmd("pip", "install", "--no-cache-dir", *pins),)),
        Part(
            block="frameworks",
            stage="final",
            # each imports and is the pinned release; torch is still the image's (the torch
            # block's %test checks its version), so pip kept it while resolving their needs
            test=(cmd("python", "-m", "smoke.imports", *pins),),
            help=(
                "Frameworks: "
                + ", ".join(f"{name} {version}" for name, version in target.python.frameworks)
                + " (examples/ in the project shows each under torchrun and srun).",
            ),
        ),
    ]
