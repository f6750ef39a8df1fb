"""wrappers/launchenv.py installed into the image's venv, so `import launchenv` works in
training scripts under torchrun, srun or mpirun. A top-layer block: the module's text is part
of the definition, so editing it rebuilds only the top layer."""

from pathlib import Path

from ..embed import SITE_PACKAGES, heredoc
from ..parts import Part
from ..shell import python_check

SOURCE = Path(__file__).resolve().parents[2] / "wrappers" / "launchenv.py"
END = "LAUNCHENV_PY"

_CHECK = """
import launchenv
launch = launchenv.detect({})
assert (launch.source, launch.rank, launch.world_size) == ("single", 0, 1), launch
print("launchenv:", launchenv.__file__)
"""


def parts(target):
    return [
        Part(block="launchenv", stage="build",
             post=(SITE_PACKAGES, *heredoc('"$site_packages/launchenv.py"', SOURCE.read_text(), END))),
        Part(block="launchenv", stage="final", test=(python_check("python", _CHECK),),
             help=("`import launchenv; launchenv.apply()` sets RANK, LOCAL_RANK, WORLD_SIZE, "
                   "LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT from torchrun, MPI or Slurm.",)),
    ]
