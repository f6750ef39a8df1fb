"""Putting a published version in place, and finishing what an interrupted publish left.

A version's module files live in its folder; `modulefiles/NAME/VERSION.lua` (and the Tcl
`VERSION`) are relative links to them, written before the folder is renamed into place, so
that one rename switches folder and module files together. The rename swaps the new folder
with the published one in one step (renameat2 RENAME_EXCHANGE) where the file system can;
elsewhere (NFS, Lustre, GPFS) it takes two renames, and a publish killed between them leaves
the version whole in .VERSION.old-*, which `recover` renames back. publish, verify and default
all call it under the name's lock (verify and default through `settle`, only when something
was left), so each finds every version as it was or wholly the new one.
"""

import ctypes
import fcntl
import json
import os
import re
import secrets
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

from .. import faults
from ..errors import CheckFailed
from ..published import MANIFEST

LOCK = ".publish.lock"
LOCK_WAIT = 3600  # s; a publish copies one image, minutes even on a slow file system


def module_files(version, tcl) -> dict:
    """{entry in modulefiles/NAME: the file in the version's folder it links to}"""
    return {f"{version}.lua": "module.lua", **({version: "module.tcl"} if tcl else {})}


def link_target(name, version, file):
    """Relative, from PREFIX/modulefiles/NAME/: a prefix copied or moved whole still works."""
    return f"../../{name}/{version}/{file}"


RENAME_EXCHANGE = 2
AT_FDCWD = -100


def move_into_place(staging: Path, root: Path):
    """Rename the staged folder to ``root``; an existing one is swapped out in one step where
    the file system can, else in two renames that `recover` completes backwards."""
    if not root.exists():
        os.rename(staging, root)
        faults.point("publish:new-moved-in")
        return
    if not faults.no_rename_exchange() and _exchange(staging, root):
        faults.point("publish:exchanged")
        old = staging  # now holds the replaced version
    else:
        old = staging.with_name(f".{root.name}.old-{staging.name.rsplit('-', 1)[1]}")
        os.rename(root, old)
        faults.point("publish:old-moved-aside")
        try:
            os.rename(staging, root)
        except BaseException:
            os.rename(old, root)
            raise
        faults.point("publish:new-moved-in")
    faults.point("publish:removing-old")
    # Files held open by running jobs can stay on NFS (.nfs*): the published version is in
    # place, so that is no failure; the next publish removes the rest.
    shutil.rmtree(old, ignore_errors=True)
    if old.exists():
        print(
            f"note: part of the replaced version is still in {old} (files in use?); "
            "the next publish of this name removes it"
        )
    faults.point("publish:old-removed")


def _exchange(first: Path, second: Path) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    return (
        renameat2 is not None
        and renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) == 0
    )


def symlink_atomic(target: str, path: Path):
    """Point ``path`` at ``target``; a reader sees the old link or the new one, never none."""
    if path.is_symlink() and os.readlink(path) == target:
        return
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    os.symlink(target, tmp)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def lock(folder: Path, wait=LOCK_WAIT):
    """One publish, verify repair or default per name at a time; a second one waits."""
    path = folder / LOCK
    with open(path, "a") as handle:
        deadline = time.monotonic() + wait
        told = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise CheckFailed(
                        f"{path}: another publish of {folder.name} has held it for "
                        f"over {wait} s; wait for it to end, or end it"
                    ) from None
                if not told:
                    print(f"waiting for another publish of {folder.name} to end ({path})", flush=True)
                    told = True
                time.sleep(0.2)
        yield


# .VERSION.partial-XXXXXXXX (staging, or after an exchange the replaced version) and
# .VERSION.old-XXXXXXXX (the replaced version, in the fallback's two renames)
LEFTOVER = re.compile(r"\.(?P<version>.+)\.(?P<kind>partial|old)-[a-z0-9_]{8}")
TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")  # write_atomic's, _symlink_atomic's


def recover(folder: Path, modules: Path) -> list:
    """Undo or finish what killed publishes of this name left; the caller holds the lock, so
    none is running. A version found only in .VERSION.old-* (killed between the fallback's two
    renames) is renamed back; every other hidden folder is garbage: staging, or a replaced
    version. Module file links are made to match each version's publish.json, and those of a
    version that is not there (killed before it was moved in) removed. One line per change."""
    done = []
    found = [
        (path, match)
        for path in sorted(folder.iterdir())
        if (match := LEFTOVER.fullmatch(path.name)) and path.is_dir() and not path.is_symlink()
    ]
    for path, match in found:
        root = folder / match["version"]
        if match["kind"] == "old" and not os.path.lexists(root):
            os.rename(path, root)
            done.append(f"restored {root} from {path.name}, where an interrupted publish had moved it")
    for path, _ in found:
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
            done.append(
                f"removed {path} (left by an interrupted publish)"
                if not path.exists()
                else f"note: could not remove all of {path} (files in use?)"
            )
    if not modules.is_dir():
        return done
    for entry in sorted(modules.iterdir()):
        if TEMPORARY.fullmatch(entry.name):
            entry.unlink(missing_ok=True)
        elif entry.is_symlink() and not entry.exists():
            match = LINK.fullmatch(os.readlink(entry))
            if match and match["name"] == folder.name and not (folder / match["version"]).exists():
                entry.unlink()
                done.append(
                    f"removed {entry} (a module file of {folder.name}/"
                    f"{match['version']}, which an interrupted publish did not move in)"
                )
    for root in sorted(folder.iterdir()):
        files = listed_modules(root)
        if files is not None and not root.name.startswith("."):
            done += fix_modules(modules, folder.name, root.name, files)
    return done


LINK = re.compile(r"\.\./\.\./(?P<name>[^/]+)/(?P<version>[^/]+)/module\.(lua|tcl)")


def listed_modules(root: Path):
    """The module files a version was published with ({entry: file}), or None for a folder
    that is not there or was published by an older builder (its module files not links)."""
    try:
        files = json.loads((root / MANIFEST).read_text()).get("modules")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(files, dict) or not set(files.values()) <= {"module.lua", "module.tcl"}:
        return None  # never a link out of the version's folder
    return files


def module_fixes(modules: Path, name, version, files) -> list:
    """[(entry, link target or None to remove)] that make the version's module files the ones
    it was published with: a link for each, nothing else under its names."""
    fixes = []
    for entry in (f"{version}.lua", version):
        path = modules / entry
        if entry in files:
            target = link_target(name, version, files[entry])
            if not path.is_symlink() or os.readlink(path) != target:
                fixes.append((entry, target))
        elif os.path.lexists(path):
            fixes.append((entry, None))
    return fixes


def fix_modules(modules: Path, name, version, files) -> list:
    done = []
    for entry, target in module_fixes(modules, name, version, files):
        if target is None:
            (modules / entry).unlink()
            done.append(f"removed {modules / entry} (not published with {name}/{version})")
        else:
            symlink_atomic(target, modules / entry)
            done.append(f"linked {modules / entry} to {target}")
    return done


def settle(root: Path):
    """Before verify or default reads a version: undo or finish what an interrupted publish of
    it left, as the next publish would. Nothing is written where nothing was left."""
    folder = root.parent
    modules = folder.parent / "modulefiles" / folder.name
    if not _interrupted(root, modules):
        return
    try:
        with lock(folder):
            done = recover(folder, modules)
    except OSError as error:  # not the owner: say so, and check what is there
        print(
            f"note: an interrupted publish left {folder.name}/{root.name} unfinished in "
            f"{folder} ({error.strerror}); run verify or publish as its owner to finish it"
        )
        return
    for line in done:
        print(line)


def _interrupted(root: Path, modules: Path) -> bool:
    folder, version = root.parent, root.name
    if not folder.is_dir():
        return False
    if any((match := LEFTOVER.fullmatch(path.name)) and match["version"] == version for path in folder.iterdir()):
        return True
    files = listed_modules(root)
    if files is not None:
        return bool(module_fixes(modules, folder.name, version, files))
    return not root.exists() and any(
        path.is_symlink() and not path.exists() for path in (modules / f"{version}.lua", modules / version)
    )
