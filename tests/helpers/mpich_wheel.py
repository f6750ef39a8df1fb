"""A real MPICH for tests that ask MPICH itself: the build PyPI's `mpich` package ships
(libmpi.so.12 with its own libfabric and UCX), unpacked once into the user's cache. Its release
is the one lumi-rocm builds from source (versions.yaml sources.mpich), so the control variables
the image sets are the ones this library knows."""

import shutil
import sys
from pathlib import Path

from helpers import pypi_wheel

from builder import runner
from builder.host.cache import cache_dir

VERSION = "5.0.1"


def libmpi() -> Path:
    """This MPICH's libmpi.so.12, downloaded and unpacked when the cache lacks it."""
    return pypi_wheel.data_folder("mpich", VERSION, "lib/libmpi.so.12") / "lib" / "libmpi.so.12"


def python_with_mpi4py(mpi4py_version: str) -> Path:
    """A Python whose mpi4py (the images' release) loads this MPICH: a venv in the cache with
    PyPI's mpi4py and mpich wheels, made once."""
    venv = cache_dir() / "test-tools" / f"mpi4py-{mpi4py_version}-mpich-{VERSION}"
    python = venv / "bin" / "python"
    if not (venv / ".ready").is_file():
        shutil.rmtree(venv, ignore_errors=True)
        runner.run([sys.executable, "-m", "venv", str(venv)], timeout=300)
        runner.run(
            [str(python), "-m", "pip", "install", "-q", "--only-binary=:all:"]
            + [f"mpi4py=={mpi4py_version}", f"mpich=={VERSION}"],
            timeout=900,
        )
        (venv / ".ready").touch()
    return python
