"""DeepSpeed's source distribution at the pinned version, as the images' builds compile it:
downloaded once with pip into the user's cache (sdists/), unpacked per test session. Tests run
DeepSpeed's own op_builder in it, so what they check is what a build would detect."""

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

SDIST_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hpc-ml-containers" / "sdists"
DOWNLOAD_TIMEOUT_S = 600


def sdist(version, scratch: Path) -> Path:
    """The cached sdist of DeepSpeed ``version``, downloaded into ``scratch`` first if missing."""
    kept = SDIST_CACHE / f"deepspeed-{version}.tar.gz"
    if kept.is_file():
        return kept
    SDIST_CACHE.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        + ["-d", str(scratch), f"deepspeed=={version}"],
        capture_output=True,
        text=True,
        timeout=DOWNLOAD_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    shutil.move(str(scratch / kept.name), kept)  # whole, or not at all
    return kept


def unpacked(version, scratch: Path, into: Path) -> Path:
    """DeepSpeed ``version``'s source tree, unpacked under ``into``."""
    with tarfile.open(sdist(version, scratch)) as archive:
        archive.extractall(into, filter="data")
    return into / f"deepspeed-{version}"
