"""A real MPICH for tests that ask MPICH itself: the build PyPI's `mpich` package ships
(libmpi.so.12 with its own libfabric and UCX), unpacked once into the user's cache. Its release
is the one lumi-rocm builds from source (versions.yaml sources.mpich), so the control variables
the image sets are the ones this library knows."""

import os
import shutil
import sys
import zipfile
from pathlib import Path

from builder import runner
from builder.host.cache import cache_dir

VERSION = "5.0.1"


def libmpi() -> Path:
    """This MPICH's libmpi.so.12, downloaded and unpacked when the cache lacks it."""
    prefix = cache_dir() / "test-tools" / f"mpich-{VERSION}"
    if not (prefix / "lib" / "libmpi.so.12").is_file():
        wheels = cache_dir() / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        found = sorted(wheels.glob(f"mpich-{VERSION}-*.whl"))
        if not found:
            runner.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
                + ["--dest", str(wheels), f"mpich=={VERSION}"],
                timeout=600,
            )
            found = sorted(wheels.glob(f"mpich-{VERSION}-*.whl"))
        partial = prefix.with_name(prefix.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with zipfile.ZipFile(found[-1]) as wheel:
            wheel.extractall(partial)
        shutil.rmtree(prefix, ignore_errors=True)
        os.replace(partial / f"mpich-{VERSION}.data" / "data", prefix)
        shutil.rmtree(partial, ignore_errors=True)
    return prefix / "lib" / "libmpi.so.12"
