"""`hpcml bundle TARGET`: every file a build of the target's locks fetches, in one folder, and
the check a build from it starts with.

    bundles/cpu/
      SHA256SUMS                  every file below, as `sha256sum -c` reads it
      locks/cpu/...               the locks it was made from
      debian/dists/bookworm/...   Debian's signed InRelease and indexes, as the mirror served them
      debian/pool/main/...        each locked .deb of every stage (the updates pocket's too), and
                                  the builder's own debootstrap (debootstrap_kit), for a host with none
      debian/dists/trixie/...     with toolbox/: the Apptainer toolbox's root, for a host with no
                                  Apptainer (toolbox_part), its .debs in debian/pool/ too
      debian-security/...         the security pocket's InRelease, indexes and locked .debs
      python/                     each file of the Python lock (pip's find-links, no index)
      tools/                      the builder's own distributions, to install it offline (tools_part)
      pyenv/                      with --pyenv LOCK: each file of project envs' locks, and the locks
                                  in pyenv/locks/ (pyenv_part), kept when another env is added

Made again into the same folder, it fetches only what is missing or changed.

Example: make(tree, "cpu", Path("bundles/cpu"), Progress()); checked(tree, "cpu", Path("bundles/cpu"))
"""

import shutil
import time
from pathlib import Path

from ..errors import RecipeError, ToolError
from ..fileio import sha256_file, write_atomic
from ..host import debootstrap_kit, hostinfo
from ..lockfile import PythonLock
from ..pyenv_lock import load as load_pyenv
from ..render.layer_sharing import plan_layers
from . import debian_part, fetched, manifest, pyenv_part, python_part, toolbox_part, tools_part

LOCKS = "locks"


def make(tree, name, out: Path, progress, down=(), pyenvs=()) -> dict:
    """Fetch and check the bundle of ``name`` into ``out``; returns {path: sha256}. ``down``:
    the pip indexes that do not answer (left out, as a build leaves them out); ``pyenvs``: the
    paths of project env locks whose files it takes too (kept with those it held before)."""
    start = time.monotonic()
    debian, python = locks_of(tree, name)
    envs = [_env_lock(path, name) for path in pyenvs]
    out.mkdir(parents=True, exist_ok=True)
    files = pyenv_part.kept(manifest.read(out)) if (out / manifest.NAME).is_file() else {}
    files.update(_copy_locks(tree, debian, python, out))
    if debian:
        mirrors = {"debian": hostinfo.debian_mirror(), "debian-security": hostinfo.security_mirror()}
        progress.step(f"Debian: the indexes and {sum(len(lock.packages) for lock in debian)} locked packages")
        files.update(debian_part.fetch_indexes(debian, mirrors, out))
        debs = debian_part.fetch_debs(debian, mirrors, out)
        files.update(debs)
        progress.step(f"Debian: {len(debs)} .deb files, each with its index's sha256, the lock's where it locks it")
        files.update(_debootstrap_kit(out, mirrors["debian"]))
        files.update(toolbox_part.make(out, mirrors["debian"], progress))
    for lock in python:
        wanted = python_part.files(lock, down)
        progress.step(f"Python: {len(wanted)} files of {lock.path}")
        fetched_now = 0
        for path, (url, sha256) in sorted(wanted.items()):
            fetched_now += fetched.fetch(url, out / path, sha256) == "fetched"
            files[path] = sha256
        progress.step(f"Python: {fetched_now} fetched, {len(wanted) - fetched_now} there already")
    for path, lock in zip(pyenvs, envs):
        files.update(_env_files(out, Path(path), lock, python, progress, down))
    files.update(_tools(out, progress, down))
    manifest.write(out, files)
    checked(tree, name, out)
    size = manifest.size(out, files)
    progress.step(f"{out}: {len(files)} files, {size / 1e6:.0f} MB, checked, in {time.monotonic() - start:.0f} s")
    return files


def _env_lock(path, name):
    lock = load_pyenv(path)
    if lock.target != name:
        raise RecipeError(f"--pyenv: an env lock for image {lock.target}, not {name}", file=str(path))
    return lock


def _env_files(out: Path, path: Path, lock, python, progress, down) -> dict:
    """A project env's files (pyenv_part) and its lock's copy."""
    indexes = [url for image_lock in python for url in python_part.indexes(image_lock)]
    wanted = pyenv_part.files(lock, indexes, down)
    for file, (url, sha256) in sorted(wanted.items()):
        fetched.fetch(url, out / file, sha256)
    copy = pyenv_part.lock_path(path)
    (out / copy).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, out / copy)
    progress.step(f"project env: {len(wanted)} files of {path}")
    return {copy: sha256_file(out / copy)} | {file: sha256 for file, (_, sha256) in wanted.items()}


def _debootstrap_kit(out: Path, mirror: str) -> dict:
    """The two .debs of the builder's own debootstrap (host/debootstrap_kit), at their pool
    paths: a host without debootstrap fetches them from the bundle as from a mirror."""
    for path, sha256 in debootstrap_kit.PACKAGES.values():
        fetched.fetch(f"{mirror.rstrip('/')}/{path}", out / "debian" / path, sha256)
    return {f"debian/{path}": sha256 for path, sha256 in debootstrap_kit.PACKAGES.values()}


def _tools(out: Path, progress, down) -> dict:
    """The builder's own distributions (tools_part), for installing it where nothing answers."""
    wanted = tools_part.files(down)
    for path, (url, sha256, _) in sorted(wanted.items()):
        fetched.fetch(url, out / path, sha256)
    write_atomic(out / tools_part.REQUIREMENTS, tools_part.requirements(wanted))
    progress.step(f"the builder's own: {len(wanted)} files of {len({w[2] for w in wanted.values()})} distributions")
    return {tools_part.REQUIREMENTS: sha256_file(out / tools_part.REQUIREMENTS)} | {
        path: sha256 for path, (_, sha256, _) in wanted.items()
    }


def pip_indexes(tree, name) -> list:
    """The pip indexes the target's Python locks name (torch's), for the check of which answer."""
    return list(dict.fromkeys(url for lock in locks_of(tree, name)[1] for url in python_part.indexes(lock)))


def checked(tree, name, bundle: Path) -> dict:
    """The bundle's files after reading each one back and matching it to the target's locks as
    the repository holds them now; one line names the first that does not match."""
    manifest.require(bundle, f"hpcml bundle {name} --out {bundle}")
    files = manifest.check(bundle)
    debian, python = locks_of(tree, name)
    for lock in [*debian, *python]:
        path = _in_bundle(tree, lock)
        if files.get(path) != sha256_file(lock.path):
            raise ToolError(
                f"{bundle}: made for another {lock.path} than this checkout's; make it again with: "
                f"hpcml bundle {name} --out {bundle}"
            )
    debian_part.check_against_locks(debian, bundle, files)
    for lock in python:
        python_part.check_against_lock(lock, files)
    if tools_part.REQUIREMENTS in files:  # bundles made before the tools part have none
        tools_part.check(files, (bundle / tools_part.REQUIREMENTS).read_text())
    toolbox_part.check(bundle, files)
    return files


def locks_of(tree, name) -> tuple:
    """(DebianLocks, PythonLocks) a build of ``name`` installs from: those of the targets whose
    layers it builds on too. A target a bundle cannot hold yet is refused in one line."""
    target = tree.target(name)
    plans = plan_layers(tree, target.name)
    why = _not_bundled(target, plans)
    if why:
        raise RecipeError(f"target {target.name}: {why}; a bundle holds Debian and pip files only", file="command line")
    owners = [tree.target(owner) for owner in dict.fromkeys(plan.owner for plan in plans.values())]
    stages = {"build": plans["devel"].owner, "final": plans["base"].owner} if "devel" in plans else {}
    debian = [lock for owner in owners for lock in owner.debian_locks if stages.get(lock.stage) == owner.name]
    python = [owner.python_lock for owner in owners if isinstance(owner.python_lock, PythonLock)]
    if not python:
        raise RecipeError(f"target {target.name} has no Python lock; make one with: hpcml lock {target.name}")
    return debian, list({lock.path: lock for lock in python}.values())


def _not_bundled(target, plans):
    if target.site_image:
        return "it starts from the site's own image"
    if any(plan.base_images for plan in plans.values()):
        return "a layer starts from a docker image"
    if any(plan.git_sources for plan in plans.values()):
        return "a layer fetches git sources"
    if any(plan.layer in ("devel", "base") for plan in plans.values()) and not target.debian_locks:
        return "its Debian stages have no lock (hpcml lock)"
    return None


def _copy_locks(tree, debian, python, out) -> dict:
    files = {}
    for lock in [*debian, *python]:
        path = _in_bundle(tree, lock)
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lock.path, out / path)
        files[path] = sha256_file(out / path)
    return files


def _in_bundle(tree, lock) -> str:
    """locks/<target>/<file>: where a lock's copy sits in the bundle."""
    where = Path(lock.path).resolve()
    return f"{LOCKS}/{where.parent.name}/{where.name}"
