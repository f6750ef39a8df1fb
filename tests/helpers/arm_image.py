"""A small aarch64 image built on this x86-64 host under QEMU, by the route gh200-cuda's
definitions take: their own Bootstrap and %setup lines (debootstrap --arch=arm64 into an empty
root, on the host), then %post and %test emulated. It adds Python 3 and g++ (with the C
library's headers), minutes rather than gh200-cuda's hours, and is kept in the user's cache
under a hash of its definition, so a rerun takes it in seconds. tests/conftest.py hands it to
tests as the session's `arm_image`."""

from conftest import ROOT
from helpers import cached_image, deffile

from builder.host import emulation

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
    image = cached_image.path_for("arm64-gxx", text)
    if image.is_file():
        return image
    emulation.ensure("aarch64")  # as `build` does: registers Debian's qemu-user-static as root
    return cached_image.build(apptainer, image, text, 2400, "aarch64 test image (under QEMU)")
