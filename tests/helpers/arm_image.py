"""A small aarch64 image built on this x86-64 host under QEMU, by the route gh200-cuda's
definitions take: their own Bootstrap and %setup lines (debootstrap --arch=arm64 into an empty
root, on the host), then %post and %test emulated. It adds Python 3 and g++ (with the C
library's headers), minutes rather than gh200-cuda's hours, and is kept in the user's cache
under a hash of its definition, so a rerun takes it in seconds. tests/conftest.py hands it to
tests as the session's `arm_image`."""

import hashlib
import os
import subprocess
import sys
import time

from conftest import ROOT
from helpers import deffile

from builder.host import cache, emulation, hostinfo

ROUTE = deffile.split((ROOT / "containers" / "gh200-cuda.devel.def").read_text())[0]
PACKAGES = "python3 g++"


def definition() -> str:
    """gh200-cuda's devel header and %setup, as rendered, with a %post and %test of our own."""
    setup = ROUTE.section("setup").body
    assert "debootstrap --arch=arm64" in setup, setup
    return (
        "\n".join(f"{key}: {value}" for key, value in ROUTE.header.items())
        + f"\n\n%setup\nset -eu\n{setup}\n%post\nset -eu\n"
        f"apt-get update\napt-get install -y --no-install-recommends {PACKAGES}\napt-get clean\n"
        "rm -rf /var/lib/apt/lists/*\n\n%test\nset -eu\n"
        "python3 -c 'import platform; assert platform.machine() == \"aarch64\", platform.machine()'\n"
    )


def ready(apptainer):
    """The image's path, built first when the cache lacks it."""
    text = definition()
    image = cache.cache_dir() / "test-images" / f"arm64-gxx-{hashlib.sha256(text.encode()).hexdigest()[:16]}.sif"
    if image.is_file():
        return image
    emulation.ensure("aarch64")  # as `build` does: registers Debian's qemu-user-static as root
    image.parent.mkdir(parents=True, exist_ok=True)
    path = image.with_suffix(".def")
    path.write_text(text)
    partial = image.with_suffix(".partial.sif")
    argv = [apptainer, "build", "--force", *(["--fakeroot"] if hostinfo.needs_fakeroot() else [])]
    argv += ["--build-arg", f"MIRROR={hostinfo.debian_mirror()}", str(partial), str(path)]
    started = time.monotonic()
    built = subprocess.run(argv, capture_output=True, text=True, timeout=2400)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    print(f"\naarch64 test image built under QEMU in {time.monotonic() - started:.0f} s", file=sys.stderr)
    os.replace(partial, image)
    return image
