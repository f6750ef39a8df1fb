"""Install the union of the Debian/Ubuntu packages that every block asked for, in one go.

Emits: "os", build and final (each only when it has packages to install), right after
build_host, in the base layers only: apt's archive areas, then one apt-get install.
Reads: the packages the base-layer blocks asked for (``wanted``: their Part.packages plus
target.os.packages.build and .final, the target's os.packages.build and .final);
target.os.components (os.components: Debian archive areas beyond main). No site fields.
`install()` is also what the deepspeed block installs its ops' packages with, in the top layer.

Example, recipes/targets/v100-cuda.yaml:

    os:
      components: [main, contrib, non-free]     # nvidia-cuda-toolkit is in non-free

renders (containers/v100-cuda.devel.def, lines shortened):

    echo '--- devel: os'
    export DEBIAN_FRONTEND=noninteractive
    if [ -f /etc/apt/sources.list ]; then sed -i -E 's/^(deb .*) main$/\\1 main contrib non-free/' ...
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then sed -i -E ...
    apt-get update
    apt-get install -y --no-install-recommends ca-certificates g++ g++-13 make nvidia-cuda-toolkit ...
    apt-get clean
    rm -rf /var/lib/apt/lists/*
"""

from ...shell import cmd
from ..parts import Part


def parts(target, wanted):
    out = []
    for stage in ("build", "final"):
        packages = sorted(wanted[stage])
        if not packages:
            continue
        out.append(
            Part(
                block="os",
                stage=stage,
                build_env=(("DEBIAN_FRONTEND", "noninteractive"),),
                post=areas(target.os.components) + install(packages),
            )
        )
    return out


def areas(components) -> tuple:
    """Lines that let apt use more of Debian's archive areas (non-free holds nvidia-cuda-toolkit)
    than the main that debootstrap sets up, in either sources format."""
    if tuple(components) == ("main",):
        return ()
    wanted = " ".join(components)
    return (
        f"if [ -f /etc/apt/sources.list ]; then sed -i -E 's/^(deb .*) main$/\\1 {wanted}/' /etc/apt/sources.list; fi",
        "if [ -f /etc/apt/sources.list.d/debian.sources ]; then sed -i -E "
        f"'s/^Components: main$/Components: {wanted}/' /etc/apt/sources.list.d/debian.sources; fi",
    )


def install(packages) -> tuple:
    """Shell lines that install Debian/Ubuntu packages and leave no package lists behind."""
    return (
        "apt-get update",
        cmd("apt-get", "install", "-y", "--no-install-recommends", *packages),
        "apt-get clean",
        "rm -rf /var/lib/apt/lists/*",
    )
