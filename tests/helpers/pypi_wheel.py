"""A PyPI wheel's data folder (`NAME-VERSION.data/data`: bin/, lib/, ...) unpacked once into
the user's cache: how the tests get an MPI that this machine's Debian does not package."""

import os
import shutil
import sys
import zipfile
from pathlib import Path

from builder import runner
from builder.host.cache import cache_dir


def data_folder(name: str, version: str, marker: str) -> Path:
    """The unpacked data of ``name``==``version`` in the cache, downloaded and unpacked when
    the cache lacks ``marker`` (a path inside it). zipfile keeps no modes: bin/ is made
    executable."""
    prefix = cache_dir() / "test-tools" / f"{name}-{version}"
    if not (prefix / marker).is_file():
        wheels = cache_dir() / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
        if not found:
            runner.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
                + ["--dest", str(wheels), f"{name}=={version}"],
                timeout=600,
            )
            found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
        partial = prefix.with_name(prefix.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with zipfile.ZipFile(found[-1]) as wheel:
            wheel.extractall(partial)
        data = partial / f"{name}-{version}.data" / "data"
        for program in (data / "bin").iterdir() if (data / "bin").is_dir() else ():
            program.chmod(0o755)
        shutil.rmtree(prefix, ignore_errors=True)
        os.replace(data, prefix)
        shutil.rmtree(partial, ignore_errors=True)
    return prefix
