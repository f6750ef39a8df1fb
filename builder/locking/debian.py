"""The Debian half of a lock: for each stage of a target that debootstrap makes (build: the
devel layer; final: the base layer under the image), the packages its root holds, resolved
without building (host/debian_resolve.py) from the mirror a build would use, into
builder.lockfile's DebianLock. Example:

    lock_stages(tree, "cpu")  # -> (DebianLock build: 200 packages, DebianLock final: 144)
"""

import dataclasses

from .. import lockfile
from ..host import debian_resolve as debian
from ..host import hostinfo
from ..render.layer_sharing import plan_layers

# the suite's pockets every Debian root takes, as a current Debian stable system does: the
# point-release updates and the security archive, which reach `main` only at a point release
POCKETS = ("updates", "security")


def asked(tree, name) -> dict:
    """{stage: the packages its apt-get installs}: the devel layer's (build) or the base
    layer's (final), and the ones DeepSpeed's ops need, which the top layer installs in both."""
    plans = plan_layers(tree, name)
    ops = plans["image"].apt_packages
    return {
        "build": tuple(sorted({*plans["devel"].apt_packages, *ops})),
        "final": tuple(sorted({*plans["base"].apt_packages, *ops})),
    }


def debootstrapped(target) -> bool:
    return not target.site_image and all(stage.bootstrap == "debootstrap" for stage in target.stages)


def excludes(target) -> tuple:
    """What the stage's bootstrap leaves out: Apptainer's debootstrap, for an image of the
    host's architecture, its --exclude; the builder's own, for another, nothing."""
    return () if target.debootstraps_itself else debian.APPTAINER_EXCLUDES


def resolve_stage(tree, target, stage: str, mirror: str, security_mirror: str) -> lockfile.DebianLock:
    names = asked(tree, target.name)[stage]
    suite = target.stage(stage).image
    packages = debian.resolve(
        suite,
        target.debian_arch,
        mirror,
        names,
        exclude=excludes(target),
        components=target.os.components,
        pockets=POCKETS,
        security_mirror=security_mirror,
    )
    components = target.os.components
    return lockfile.DebianLock(stage, suite, target.debian_arch, components, names, packages, pockets=POCKETS)


def fits(lock, tree, target, stage) -> bool:
    """Whether ``lock`` was made for what the stage asks now, from the suite and its pockets,
    with the sha256 of every .deb (a lock made before the locks held them, or took the
    pockets, is stale, so that `hpcml lock` resolves it again)."""
    return (
        lock is not None
        and hashed(lock)
        and (lock.suite, lock.arch, lock.components, lock.asked, lock.pockets)
        == (
            target.stage(stage).image,
            target.debian_arch,
            target.os.components,
            asked(tree, target.name)[stage],
            POCKETS,
        )
    )


def hashed(lock) -> bool:
    """Whether every package holds its .deb's sha256: a lock from before they did holds none."""
    return all(package.sha256 for package in lock.packages)


def lock_stages(tree, name, update=False) -> tuple:
    """The target's DebianLocks, a stage kept as it is where it still fits (unless ``update``)."""
    target = tree.target(name)
    if not debootstrapped(target):
        return ()
    mirror, security = hostinfo.debian_mirror(), hostinfo.security_mirror()
    made = []
    for stage in ("build", "final"):
        current = lockfile.load_debian(tree.root, name, stage)
        lock = current if current and not update and fits(current, tree, target, stage) else None
        lock = lock or resolve_stage(tree, target, stage, mirror, security)
        made.append(dataclasses.replace(lock, path=str(lockfile.debian_path_of(tree.root, name, stage))))
    return tuple(made)
