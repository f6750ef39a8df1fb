"""`hpcml lock`'s Python half: what each block's pip step asks for, resolved by uv for the
image's Python and platform (not the host's) from the sources a build would use, step after
step, into builder.lockfile's format.

Step by step: each step is resolved with every step before it, those held at their locked
versions (uv's constraints). So a step never moves what a lower step installed, and what the
base layers hold does not depend on the top layer: a new framework pin re-locks the top
steps only, and torch's layer stays as built. Example:

    lock_target(tree, "cpu")  # -> PythonLock with steps python, torch, mpi, extras, ...
"""

import dataclasses
import urllib.parse

from .. import lockfile
from ..errors import RecipeError, ToolError
from ..host import pip_indexes, torch_source, uv
from ..render.blocks import parts_by_layer
from ..render.pip_install import Recorder


def requests(target) -> tuple:
    """(base steps, top steps): the Requests of the blocks, in install order."""
    recorder = Recorder()
    layers = parts_by_layer(dataclasses.replace(target, python_lock=recorder))
    base_blocks = {part.block for part in layers["base"]}
    base = tuple(r for r in recorder.requests if r.step in base_blocks)
    return base, tuple(r for r in recorder.requests if r.step not in base_blocks)


def lockable(tree, name):
    """The target and its (python, platform); a one-line error where it cannot be locked."""
    target = tree.target(name)
    platform = lockfile.platform_of(target, tree.versions.data)
    if target.site_image or platform is None:
        raise RecipeError(
            f"target {name} starts from a site's image, whose Python packages its site installed; "
            "only the packages the build adds could be locked, and that is not done yet",
            file="command line",
        )
    return target, platform


def lock_target(tree, name, update=False, owner_lock=None):
    """The target's PythonLock. ``update``: every step resolved afresh; else the steps the
    current lock still fits are kept, and those from the first that changed are resolved.
    ``owner_lock``: the lock of the target whose lower layers this one builds on, whose base
    steps it takes as they are."""
    target, (python, platform) = lockable(tree, name)
    base, top = requests(target)
    current = target.python_lock if isinstance(target.python_lock, lockfile.PythonLock) else None
    if current and (current.python, current.platform) != (python, platform):
        current = None
    kept = [] if update else _still_fitting(current, (*base, *top))
    if owner_lock is not None:
        kept = [owner_lock.step(r.step) for r in base] + kept[len(base) :]
    steps, asked = list(kept), (*base, *top)
    if len(steps) < len(asked):  # else every step is as the blocks ask: no source is asked
        down = pip_indexes.indexes_down(tuple(r.index for r in asked if r.index))
        torch_source.check(target.torch, down)
        for request in asked[len(kept) :]:
            steps.append(_resolve_step(request, steps, asked, python, platform, down))
    return lockfile.PythonLock(name, python, platform, tuple(steps), str(lockfile.path_of(tree.root, name)))


def _still_fitting(current, asked) -> list:
    """The current lock's steps, from the first, as long as each asks what the block asks."""
    kept = []
    for request in asked:
        step = current.step(request.step) if current else None
        if step is None or step.asked != request.asked():
            break
        kept.append(step)
    return kept


def _resolve_step(request, before, asked, python, platform, down) -> lockfile.Step:
    """The step's new distributions: the resolve of it and every step before it, those at
    their locked versions, less what they hold."""
    upto = asked[: asked.index(request) + 1]
    held = {pin.name: pin for step in before for pin in step.pins}
    packages, error = uv.compile_pylock(
        [req for r in upto for req in r.requirements],
        python,
        platform,
        indexes=[r.index for r in upto if r.index],
        down=down,
        constraints=[f"{n}=={p.version}" for n, p in sorted(held.items())],
        options=[option for r in upto for option in r.options],
    )
    if packages is None:
        reason = " ".join(line.strip() for line in error.strip().splitlines()[-3:])
        raise ToolError(f"uv could not lock step {request.step} ({request.asked()}): {reason}")
    pins = [_pinned(package) for package in packages if lockfile.normal_name(package["name"]) not in held]
    return lockfile.Step(request.step, request.asked(), tuple(pins))


def _pinned(package) -> lockfile.Pinned:
    """A pylock.toml package as the lock keeps it: the wheels uv chose for the platform (their
    file names, not their URLs: a local mirror's address is this machine's), else the sdist."""
    files = uv.files(package)
    hashes = tuple(f["hashes"]["sha256"] for f in files)
    names = tuple(urllib.parse.unquote((f.get("url") or f.get("path", "")).rsplit("/", 1)[-1]) for f in files)
    if not hashes:
        raise ToolError(f"uv named no file with a sha256 for {package['name']} {package['version']}")
    return lockfile.Pinned(lockfile.normal_name(package["name"]), package["version"], hashes, names)
