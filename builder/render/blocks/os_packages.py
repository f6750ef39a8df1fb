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
                        post=areas(target.os_components) + install(packages)))
    return out


def areas(components) -> tuple:
    """Lines that let apt use more of Debian's archive areas (non-free holds nvidia-cuda-toolkit)
    than the main that debootstrap sets up, in either sources format."""
    if tuple(components) == ("main",):
        return ()
    wanted = " ".join(components)
    return (f"if [ -f /etc/apt/sources.list ]; then sed -i -E 's/^(deb .*) main$/\\1 {wanted}/' "
            "/etc/apt/sources.list; fi",
            "if [ -f /etc/apt/sources.list.d/debian.sources ]; then sed -i -E "
            f"'s/^Components: main$/Components: {wanted}/' /etc/apt/sources.list.d/debian.sources; fi")


def install(packages) -> tuple:
    """Shell lines that install Debian/Ubuntu packages and leave no package lists behind."""
    return ("apt-get update",
            cmd("apt-get", "install", "-y", "--no-install-recommends", *packages),
            "apt-get clean",
            "rm -rf /var/lib/apt/lists/*")
