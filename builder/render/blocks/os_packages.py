"""Install the union of the Debian/Ubuntu packages that every block asked for, in one go."""

from ...shell import cmd
from ..parts import Part


def parts(target, wanted):
    out = []
    for stage in ("build", "final"):
        packages = sorted(wanted[stage])
        if not packages:
            continue
        out.append(Part(block="os", stage=stage, build_env=(("DEBIAN_FRONTEND", "noninteractive"),),
                        post=install(packages)))
    return out


def install(packages) -> tuple:
    """Shell lines that install Debian/Ubuntu packages and leave no package lists behind."""
    return ("apt-get update",
            cmd("apt-get", "install", "-y", "--no-install-recommends", *packages),
            "apt-get clean",
            "rm -rf /var/lib/apt/lists/*")
