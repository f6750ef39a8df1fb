"""Install the union of the Debian/Ubuntu packages that every block asked for, in one go.

Emits: "os", build and final (each only when it has packages), right after build_host, in the
base layers only: apt's archive areas, then one apt-get install. `install()` is also how the
deepspeed block installs its ops' packages, in the top layer.
Reads: the base-layer blocks' Part.packages plus target.os.packages.build and .final;
target.os.components (Debian archive areas beyond main); the stage's Debian lock
(target.debian_locks, recipes/locks/<target>/debian-<stage>.txt) if any. No site fields.

With a lock, apt adds the pockets it names (updates, security; mirrors given at build time)
and installs exactly the lock: each asked package at its locked version, its dependencies held at
theirs by an apt preferences file kept for the install only; then any package not in the lock,
or of another version, stops the build. (An asked package the lock lacks goes in unpinned
here; the build refuses such a stale lock before it starts.)

Example, recipes/targets/v100-cuda.yaml, `os: {components: [main, contrib, non-free]}`
(nvidia-cuda-toolkit is in non-free), renders (containers/v100-cuda.devel.def, shortened):

    echo '--- devel: os'
    export DEBIAN_FRONTEND=noninteractive
    printf 'deb %s %s main\\n' '{{ MIRROR }}' trixie-updates '{{ SECURITY_MIRROR }}' trixie-security >> ...
    if [ -f /etc/apt/sources.list ]; then sed -i -E 's/^(deb .*) main$/\\1 main contrib non-free/' ...
    ...
    apt-get install -y --no-install-recommends ca-certificates=20250419+deb13u1 ... make=4.4.1-2 ...
    ...
"""

from ...lockfile import POCKET_ARCHIVES
from ...recipes.target_model import Target
from ...values.apptainer import build_arg
from ...values.shell import cmd, quote
from ..parts import Part
from ..plan import MIRROR_ARG, SECURITY_MIRROR_ARG

# apt takes the locked version of every package it installs while this file exists
# the block's name: the module is not named os, which is the standard library's
BLOCK = "os"
PREFERENCES = "/etc/apt/preferences.d/hpcml-lock"


def parts(target: Target, wanted):
    out = []
    for stage in ("build", "final"):
        packages = sorted(wanted[stage])
        if not packages:
            continue
        lock = stage_lock(target, stage)
        lines, args = pockets(lock)
        out.append(
            Part(
                block=BLOCK,
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


def stage_lock(target: Target, stage):
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
