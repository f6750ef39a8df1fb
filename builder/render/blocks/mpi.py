"""The distribution's MPI (same ABI as the site's) and mpi4py's binary wheel, which loads it.

mpi4py's wheels (4.1 and later) carry one extension per MPI ABI (Open MPI's, MPICH's) and pick
the one that matches the libmpi the loader finds at import: the image's, or the site's MPI
that the wrapper binds in for multi-node jobs. Compiling mpi4py from source took five minutes
of a fresh build and bought nothing the wheel lacks.

Emits: "mpi", build (the MPI packages for the os block; mpi4py's wheel) and final (the MPI
packages; a %test that mpi4py loads the expected MPI).
Reads: target.mpi.abi (mpi.abi: openmpi or mpich, which must be every site's site.mpi.abi,
its `mpi: abi:`; the recipe tree checks), target.mpi.mpi4py (mpi.mpi4py: true, pinned in
versions.yaml python_packages; "" for none).

Example, recipes/targets/lumi-rocm.yaml (recipes/sites/lumi.yaml has `mpi: {abi: mpich}`):

    mpi:
      abi: mpich
      mpi4py: true

renders mpich into the os block's install lines and (containers/lumi-rocm.devel.def,
containers/lumi-rocm.def):

    echo '--- devel: mpi'
    pip install --no-cache-dir --only-binary=mpi4py mpi4py==4.1.2
    ...
    echo '--- test: mpi'
    python -c 'import sys
    ...
    ' MPICH
"""

from ...shell import cmd, python_check
from ..parts import Part

PACKAGES = {"openmpi": ("openmpi-bin",), "mpich": ("mpich",)}
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
    packages = PACKAGES[target.mpi.abi]
    post, test = (), ()
    if target.mpi.mpi4py:
        # never the sdist: a missing wheel should fail here, not start a compile
        post = (cmd("pip", "install", "--no-cache-dir", "--only-binary=mpi4py", f"mpi4py=={target.mpi.mpi4py}"),)
        test = (python_check("python", _MPI4PY_CHECK, LIBRARY_NAME[target.mpi.abi]),)
    return [
        Part(block="mpi", stage="build", packages=packages, post=post),
        Part(block="mpi", stage="final", packages=packages, test=test),
    ]
