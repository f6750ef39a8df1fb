"""Before a layer is built from a lock: is every locked file still served? A wheel yanked or
deleted, or a version replaced on a mirror, would fail the build minutes in, inside pip's
hash check; asked here first (one `uv pip compile --no-deps` of the locked pins against the
build's sources), it stops the build before anything is written, in one line that names the
package, its locked and its served version, and the ways out.

Example: check(target, down=[]) -> None, or raises ToolError("regex 2026.11.19, locked in
recipes/locks/cpu/python.txt (step frameworks), is not served by this build's pip sources
(they serve 2026.12.1); ...").
"""

import shutil

from .. import contract
from ..errors import RecipeError, ToolError
from ..host import hostinfo, uv
from ..lockfile import PythonLock, normal_name
from ..locking import debian


def check(target, down) -> None:
    """Raise ToolError on the first locked distribution of ``target`` no source serves as
    locked; ``down``: the pip indexes that do not answer (left out, as the build leaves them)."""
    lock = target.python_lock
    if not isinstance(lock, PythonLock):
        return
    pins = {pin.name: (step, pin) for step in lock.steps for pin in step.pins}
    options = sorted({word for step in lock.steps for word in step.asked.split() if word.startswith("--")})
    indexes = sorted({url for step in lock.steps for url in step.extra_indexes()})
    packages, error = uv.compile_pylock(
        [f"{pin.name}=={pin.version}" for _step, pin in pins.values()],
        lock.python,
        lock.platform,
        indexes=indexes,
        down=down,
        options=[o for o in options if o.startswith(("--only-binary=", "--no-binary="))],
        no_deps=True,
    )
    if packages is None:
        missing = uv.missing_pin(error)
        if missing in pins:
            step, pin = pins[missing]
            served = _served(lock, pin.name, indexes, down)
            what = f"is not served by this build's pip sources (they serve {served})"
            raise ToolError(_drifted(lock, step, pin, what, target.name))
        reason = " ".join(line.strip() for line in error.strip().splitlines()[-2:])
        raise ToolError(f"could not ask this build's pip sources for the pins of {lock.path}: {reason}")
    for package in packages:
        step, pin = pins[normal_name(package["name"])]
        served = {f["hashes"]["sha256"] for f in uv.files(package)}
        if not served & set(pin.hashes):
            raise ToolError(_drifted(lock, step, pin, "is served as another file than the locked one", target.name))


def _served(lock, name, indexes, down) -> str:
    """The version of ``name`` the sources would give now, for the message."""
    packages, _error = uv.compile_pylock([name], lock.python, lock.platform, indexes=indexes, down=down, no_deps=True)
    return f"{name} {packages[0]['version']}" if packages else f"no release of {name} for this platform"


def _drifted(lock, step, pin, what, target) -> str:
    return (
        f"{pin.name} {pin.version}, locked in {lock.path} (step {step.name}), {what}; nothing was built. "
        f"Lock again with: hpcml lock --update {target} (then render and commit), or point pip at a "
        "mirror that keeps that release (pip's extra-index-url or find-links), or build from the "
        f"target's source bundle, made while the lock was served: hpcml build {target} --bundle DIR"
    )


def check_debian(tree, plans, planned, progress=None) -> None:
    """The same for the Debian packages of the devel and base layers about to be built: the
    mirror resolves each stage as its lock says (host/debian_resolve.py, a few seconds), or
    one line names what moved. A stage whose recipe asks for other packages than its lock
    was made for is refused first, as a stale Python lock is. A host without apt-get (a RHEL
    login node) cannot resolve: the build's own apt-get, which installs exactly the locked
    versions, is then the check, minutes later."""
    for layer, stage in (("devel", "build"), ("base", "final")):
        if layer not in planned:
            continue
        owner = tree.target(plans[layer].owner)
        lock = next((deb for deb in owner.debian_locks if deb.stage == stage), None)
        if lock is None:
            continue
        if not debian.fits(lock, tree, owner, stage):
            if not debian.hashed(lock):
                why = "it holds no sha256 of the .deb files"
            elif lock.pockets != debian.POCKETS:
                why = f"it does not take the suite's {' and '.join(debian.POCKETS)} pockets"
            else:
                why = f"the {stage} stage now asks for other Debian packages than {' '.join(lock.asked)}"
            raise RecipeError(f"the lock is stale: {why}; refresh it with: hpcml lock {owner.name}", file=lock.path)
        if shutil.which("apt-get") is None:
            if progress is not None:
                progress.step(f"no apt-get here: the {layer} layer's own apt-get checks its Debian lock")
            continue
        mirrors = hostinfo.debian_mirror(), hostinfo.security_mirror()
        served = debian.resolve_stage(tree, owner, stage, *mirrors).packages
        moved = _deb_moves(lock.packages, served)
        if moved:
            raise ToolError(
                f"the Debian mirror no longer serves what {lock.path} locks ({len(moved)} "
                f"{'package' if len(moved) == 1 else 'packages'}: "
                f"{'; '.join(moved[:5])}{'; ...' if len(moved) > 5 else ''}); nothing was built. Lock again with: "
                f"hpcml lock --update {owner.name} (then render and commit), or build from a snapshot of the "
                f"mirrors that has them ({contract.MIRROR}=SNAPSHOT-URL, and {contract.SECURITY_MIRROR} "
                "unless beside it), or from the target's source bundle, "
                f"made while they were served: hpcml build {owner.name} --bundle DIR"
            )


def _deb_moves(locked, served) -> list:
    """What moved, a package a line: its version, or the same version's .deb rebuilt as
    other bytes (a lock's sha256 differs from the index's)."""
    was, now = {p.name: p for p in locked}, {p.name: p for p in served}
    moves = []
    for name in sorted(was.keys() | now.keys()):
        old, new = was.get(name), now.get(name)
        if old is None or new is None or old.version != new.version:
            locked_as = f"{old.version} locked" if old else "not locked"
            moves.append(f"{name} {locked_as}, {f'{new.version} served' if new else 'not served'}")
        elif old.sha256 and old.sha256 != new.sha256:
            moves.append(
                f"{name} {old.version} locked as sha256:{old.sha256[:12]}..., served as sha256:{new.sha256[:12]}..."
            )
    return moves
