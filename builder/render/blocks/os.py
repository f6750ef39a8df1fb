"""Install the union of the Debian/Ubuntu packages that every block asked for, in one go.

Emits: "os", build and final (each only when it has packages to install), right after
build_host, in the base layers only: apt's archive areas, then one apt-get install.
Reads: the packages the base-layer blocks asked for (``wanted``: their Part.packages plus
target.os.packages.build and .final, the target's os.packages.build and .final);
target.os.components (os.components: Debian archive areas beyond main); the stage's Debian
lock (target.debian_locks, recipes/locks/<target>/debian-<stage>.txt) where it has one.
No site fields. `install()` is also what the deepspeed block installs its ops' packages with,
in the top layer.

With a lock, apt installs exactly it: each asked package at its locked version
(``name=version``), its dependencies held at theirs by an apt preferences file that lives
only as long as the install, and then every package the root holds is checked against the
lock; one that is not in it, or of another version, stops the build. (A stage whose recipe
asks for a package its lock lacks installs it unpinned here; the build refuses the stale lock
before it starts.)

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

from ...lockfile import POCKET_ARCHIVES
from ...shell import cmd, quote
from ..parts import Part, build_arg
from ..plan import MIRROR_ARG, SECURITY_MIRROR_ARG

# apt takes the locked version of every package it installs while this file exists
PREFERENCES = "/etc/apt/preferences.d/hpcml-lock"


def parts(target, wanted):
    out = []
    for stage in ("build", "final"):
        packages = sorted(wanted[stage])
        if not packages:
            continue
        lock = stage_lock(target, stage)
        lines, args = pockets(lock)
        out.append(
            Part(
                block="os",
                stage=stage,
                build_env=(("DEBIAN_FRONTEND", "noninteractive"),),
                post=lines + areas(target.os.components) + install(packages, lock),
                build_args=args,
            )
        )
    return out


def pockets(lock) -> tuple:
    """(lines, build arguments): the sources lines of the suite's pockets the lock takes,
    added to the one debootstrap writes, each from its archive's mirror (given at build time,
    as debootstrap's is); none without a lock."""
    if lock is None or not lock.pockets:
        return (), ()
    mirrors = {"debian": MIRROR_ARG, "debian-security": SECURITY_MIRROR_ARG}
    args = tuple(sorted({mirrors[POCKET_ARCHIVES[pocket]] for pocket in lock.pockets}))
    words = [f"{quote(build_arg(mirrors[archive]))} {suite}" for archive, suite in lock.suites()[1:]]
    return (f"printf 'deb %s %s main\\n' {' '.join(words)} >> /etc/apt/sources.list",), args


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


def stage_lock(target, stage):
    """The DebianLock of ``stage`` (build or final), or None."""
    return next((lock for lock in target.debian_locks if lock.stage == stage), None)


def install(packages, lock=None) -> tuple:
    """Shell lines that install Debian/Ubuntu packages, those of ``lock`` where there is one,
    and leave no package lists behind."""
    if lock is None:
        lines = (cmd("apt-get", "install", "-y", "--no-install-recommends", *packages),)
    else:
        lines = locked_install(packages, lock)
    return ("apt-get update", *lines, "apt-get clean", "rm -rf /var/lib/apt/lists/*")


def locked_install(packages, lock) -> tuple:
    """The lines that install ``packages`` at their locked versions, their dependencies at
    theirs, and check that the root then holds nothing the lock does not."""
    versions = {package.name: package.version for package in lock.packages}
    # sorted as `LC_ALL=C sort` sorts, for comm
    lines = sorted(f"{name}={version}" for name, version in versions.items())
    asked = [f"{name}={versions[name]}" if name in versions else name for name in packages]
    # printf, not a here-document: the lines may be indented (a kept step's), its end could not
    listed = [f"    {quote(line)} \\" for line in lines]
    return (
        'lock="$(mktemp /tmp/hpcml-apt-lock-XXXXXX)"',
        "printf '%s\\n' \\",
        *listed,
        '    > "$lock"',
        f"sed -E 's/^([^=]+)=(.*)$/Package: \\1\\nPin: version \\2\\nPin-Priority: 1001\\n/' \"$lock\" > {PREFERENCES}",
        cmd("apt-get", "install", "-y", "--no-install-recommends", *asked),
        # the bootstrap's packages too, to the pockets' versions the lock holds
        "apt-get dist-upgrade -y --no-install-recommends",
        f"rm -f {PREFERENCES}",
        "dpkg-query -W -f '${db:Status-Status} ${Package}=${Version}\\n' | awk '$1 == \"installed\" {print $2}' "
        '| LC_ALL=C sort | LC_ALL=C comm -23 - "$lock" > "$lock.extra"',
        f'if [ -s "$lock.extra" ]; then echo \'installed, but not as the Debian lock of the {lock.stage} stage says '
        '(hpcml lock --update):\' >&2; cat "$lock.extra" >&2; exit 1; fi',
        'rm -f "$lock" "$lock.extra"',
    )
