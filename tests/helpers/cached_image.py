"""Small test images built from a definition and kept in the user's cache under a hash of it,
so a rerun takes them in seconds (helpers/arm_image.py, helpers/trixie_mpi_image.py)."""

import hashlib
import os
import subprocess
import sys
import time

from builder.host import build_route, cache, hostinfo


def path_for(name: str, text: str):
    return cache.cache_dir() / "test-images" / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.sif"


def build(apptainer, image, text: str, timeout: int, what: str):
    """Build ``text`` into ``image`` (a temporary file renamed at the end) from the host's
    Debian mirror, and say on stderr how long ``what`` took."""
    image.parent.mkdir(parents=True, exist_ok=True)
    path = image.with_suffix(".def")
    path.write_text(text)
    partial = image.with_suffix(".partial.sif")
    argv = [apptainer, "build", "--force", *(["--fakeroot"] if build_route.check().fakeroot else [])]
    argv += ["--build-arg", f"MIRROR={hostinfo.debian_mirror()}", str(partial), str(path)]
    started = time.monotonic()
    built = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    print(f"\n{what} built in {time.monotonic() - started:.0f} s", file=sys.stderr)
    os.replace(partial, image)
    return image
