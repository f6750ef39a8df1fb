"""The distribution's MPI (same ABI as the site's) and mpi4py compiled against it."""

from ...shell import cmd, python_check
from ..parts import Part

PACKAGES = {"openmpi": (("libopenmpi-dev", "openmpi-bin"), ("openmpi-bin",)),
            "mpich": (("libmpich-dev", "mpich"), ("mpich",))}
LIBRARY_NAME = {"openmpi": "Open MPI", "mpich": "MPICH"}

# MPI_Get_library_version may be called before MPI_Init, so the check needs no launcher.
_MPI4PY_CHECK = """
import sys
import mpi4py
mpi4py.rc.initialize = False
from mpi4py import MPI
found = MPI.Get_library_version()
assert sys.argv[1] in found, f"mpi4py uses {found.splitlines()[0]!r}, expected {sys.argv[1]}"
print("mpi4py", mpi4py.__version__, "on", found.splitlines()[0])
"""


def parts(target):
    build_packages, final_packages = PACKAGES[target.mpi_abi]
    post, test = (), ()
    if target.mpi4py_version:
        # from source, so it links the distribution's MPI rather than a bundled one
        post = (cmd("pip", "install", "--no-cache-dir", "--no-binary=mpi4py",
                    f"mpi4py=={target.mpi4py_version}"),)
        test = (python_check("python", _MPI4PY_CHECK, LIBRARY_NAME[target.mpi_abi]),)
    return [Part(block="mpi", stage="build", packages=build_packages, post=post),
            Part(block="mpi", stage="final", packages=final_packages, test=test)]
