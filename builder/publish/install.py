"""`python -m builder publish`: install a built, smoke-tested image as a site module.

    PREFIX/<name>/<version>/   image.sif, bin/ (wrapper, site settings, entry points),
                               recipe.json, smoke.json, publish.json, module.lua, module.tcl,
                               SHA256SUMS
    PREFIX/modulefiles/<name>/<version>.lua -> ../../<name>/<version>/module.lua
    PREFIX/modulefiles/<name>/<version>     -> ../../<name>/<version>/module.tcl  (with --tcl)
    PREFIX/modulefiles/<name>/.version        the default, with --default

The version folder is assembled in a hidden folder beside its place, the module files are
linked to its place (the links dangle until it is there; Lmod and Environment Modules skip
them), then the folder is renamed into place: swapped with the published one in one rename
(renameat2 RENAME_EXCHANGE), or where the file system has no exchange (NFS, Lustre, GPFS),
the published one renamed to .VERSION.old-* and the new one into place. As the module files
live in the folder, that rename switches folder and module files together: a publish killed at
any step leaves each version as it was or fully the new one, save in the fallback's gap
between its two renames, where the version is whole in .VERSION.old-* and the next publish,
verify or default renames it back (`recover`, under the name's lock). Everything else a killed
publish leaves is removed by the next one.
"""

import ctypes
import fcntl
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from .. import __version__, faults, resources
from ..build.images import IMAGE_SUM, REPORT, built_image, image_lock, read_labels, ready_runtime
from ..errors import CheckFailed, RecipeError
from ..fileio import copy_hashed, sha256_file, write_atomic
from ..render.sitefile import GPU_FLAGS, render_site
from .modulefile import Module, render_default, render_entry, render_lua, render_tcl
from .stackinfo import stack_versions
from .verify import SUMS, locate

ENTRY_POINTS = ("python", "python3", "torchrun", "deepspeed", "ds_report", "pip")
# No "+" or "@": Environment Modules reads them as variant and version specifiers.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
MANIFEST = "publish.json"
LOCK = ".publish.lock"
LOCK_WAIT = 3600            # s; a publish copies one image, minutes even on a slow file system


def publish(tree, target_name, *, prefix, name, version, site, images: Path, smoke_dir,
            default=False, force=False, skip_smoke=False, tcl=False):
    built = built_image(tree, target_name, images, site)
    target, site, image = built.target, built.site, built.path
    # shared with smoke runs and other publishes: no build replaces the image meanwhile
    with image_lock(images, target.name, shared=True):
        prefix = _check_prefix(prefix)
        labels = read_labels(ready_runtime(site), image)
        version = version or f"{labels.get('version.torch', 'unknown')}-{target_name}"
        for what, value in (("--name", name), ("--version", version)):
            if not NAME_RE.match(value) or value.endswith(".lua"):
                raise RecipeError(f"{what} {value!r}: expected letters, digits and . _ - "
                                  "(not starting with . or -)", file="command line")
        smoke_dir = Path(smoke_dir or images / f"{target_name}.smoke")
        smoke, tested = (None, "") if skip_smoke else _passed_report(smoke_dir, image)

        root = prefix / name / version
        modules = prefix / "modulefiles" / name
        _make_dirs(root.parent, modules)
        with lock(root.parent):
            for line in recover(root.parent, modules):
                print(line)
            if root.exists() and not force:
                raise RecipeError(f"{name}/{version} is already published; --force replaces it",
                                  file=str(root))
            files = module_files(version, tcl)
            staging = Path(tempfile.mkdtemp(prefix=f".{version}.partial-", dir=root.parent))
            try:
                module = _module(target, site, name, version, root, labels, smoke)
                report = None if smoke is None else smoke_dir / REPORT
                checksum = _assemble(staging, image, site, module, labels, files, target_name,
                                     report)
                if smoke is not None and tested != checksum:
                    raise CheckFailed(f"{smoke_dir / REPORT}: the report is of another image (sha256 "
                                      f"{tested[:12] or 'not recorded'}, {image} has {checksum[:12]}); "
                                      "run the smoke tests on this build")
                faults.point("publish:staged")
                for entry, file in files.items():
                    # The same link text for every publish of this version: a published one keeps
                    # resolving to its own folder until the swap. A regular file of an older builder
                    # is replaced only after the swap, by _fix_modules.
                    if (modules / entry).is_symlink() or not (modules / entry).exists():
                        _symlink_atomic(_link_target(name, version, file), modules / entry)
                faults.point("publish:linked")
                _move_into_place(staging, root)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                try:
                    recover(root.parent, modules)   # links of a version that was not moved in
                except OSError:
                    pass                            # the next publish retries; keep the first error
                raise
            _fix_modules(modules, name, version, files)  # drops a Tcl link of an earlier --tcl publish
            faults.point("publish:modules-done")
            if default:
                write_atomic(modules / ".version", render_default(version))
                faults.point("publish:default-written")
    print(f"published {name}/{version} ({target_name} for {site.name}) in {root}")
    print(f"  image sha256 {checksum}; smoke report: "
          + ("SKIPPED (--skip-smoke)" if smoke is None else "passed"))
    print(f"  module use {prefix / 'modulefiles'}; module load {name}/{version}"
          + (" (the default)" if default else ""))
    return root


def set_default(prefix, spec):
    name, version, root = locate(prefix, spec)
    modules = root.parent.parent / "modulefiles" / name
    with lock(root.parent):
        write_atomic(modules / ".version", render_default(version))
    print(f"{name}/{version} is now the default {name} in {modules.parent}")


def _check_prefix(prefix) -> Path:
    if not prefix:
        raise RecipeError("--prefix is empty; expected the folder that holds published modules "
                          "(make publish PREFIX=/appl/local/ml)", file="command line")
    path = Path(prefix).resolve()
    if path.exists() and not path.is_dir():
        raise RecipeError("not a directory; expected the folder for published modules", file=str(path))
    if path.is_dir() and path.stat().st_mode & stat.S_IWOTH:
        raise RecipeError("world-writable: anyone could replace the published modules; "
                          "expected a folder only admins can write", file=str(path))
    return path


def _passed_report(smoke_dir: Path, image: Path):
    """(the report, the sha256 of the image it tested, or "" where none was recorded)"""
    report, recorded = smoke_dir / REPORT, smoke_dir / IMAGE_SUM
    hint = (f"run `make smoke TARGET={image.stem}` (in a job on the site's GPU nodes), or "
            "publish with --skip-smoke")
    if not report.is_file():
        raise CheckFailed(f"{report}: no smoke report; {hint}")
    try:
        data = json.loads(report.read_text())
    except ValueError as error:
        raise CheckFailed(f"{report}: not a smoke report ({error}); {hint}") from None
    if data.get("verdict") != "pass":
        failed = [n for n, c in data.get("checks", {}).items() if c.get("verdict") == "fail"]
        raise CheckFailed(f"{report}: the smoke tests did not pass (verdict "
                          f"{data.get('verdict')!r}; failed: {', '.join(failed) or 'none'}); "
                          "fix the image or the site, then run them again")
    return data, (recorded.read_text().split() or [""])[0] if recorded.is_file() else ""


def _module(target, site, name, version, root, labels, smoke):
    recipe = json.loads(labels.get("recipe", "{}"))
    versions = stack_versions(recipe, (smoke or {}).get("versions", {}))
    baked = recipe.get("environment", {})
    container_env = tuple((k, v) for k, v in site.env if str(baked.get(k)) != v)
    built = labels.get("org.label-schema.build-date", "unknown").replace("_", " ")
    recipe_sha = labels.get("recipe.sha256", "unknown")
    if smoke is None:
        tested = ("NOT RUN: published with --skip-smoke. Run `python -m smoke all` in a job "
                  "before trusting this module.")
    else:
        machine = smoke.get("machine", {})
        tested = (f"passed {smoke.get('created', '?')} on {machine.get('nodes', '?')} node(s), "
                  f"{machine.get('ranks', '?')} ranks ({machine.get('device', '?')}); "
                  f"report: {root}/smoke.json")
    stack = ", ".join(f"{k} {v}" for k, v in versions)
    help_text = "\n".join([
        f"{name}/{version}: {target.description}",
        f"Site: {site.name} ({site.description})",
        "",
        "Commands (each runs inside the container image):",
        "  " + ", ".join(ENTRY_POINTS),
        "  singularity_wrapper exec|run|shell ...   any command, with the site's binds",
        "In a job: srun singularity_wrapper exec torchrun ... (or srun python ...)",
        "Project data: export SING_BIND=/path/to/data   (comma-separated)",
        "Extra Python packages: pip install PKG   (into $HPCML_USER_BASE, default",
        f"  ~/.local/hpcml/{name}/{version}; the image itself is read-only)",
        "",
        f"Inside: {stack}",
        f"Image: {root}/image.sif, target {target.name}, built {built}",
        f"Recipe sha256: {recipe_sha} (full recipe: {root}/recipe.json)",
        f"Smoke tests: {tested}",
        f"Check the files: python -m builder verify --prefix {root.parent.parent} {name}/{version}",
        *([f"Host MPI: {site.mpi_host} ({site.mpi_abi} ABI, the image's too)"] if site.mpi_host else []),
        *(f"Note: {note}" for note in site.notes),
    ])
    whatis = (f"Name: {name}", f"Version: {version}", f"Description: {target.description}",
              f"Versions: {stack}", f"Built: {built}; recipe sha256 {recipe_sha}",
              "Smoke tests: " + ("NOT RUN (--skip-smoke)" if smoke is None else "passed"))
    runtime, slurm_mpi = site.runtime, site.slurm_mpi
    return Module(name=name, version=version, root=str(root), site=site.name,
                  description=target.description, help_text=help_text, whatis=whatis,
                  gpu_flag=GPU_FLAGS[site.gpu_vendor],
                  slurm_mpi="" if slurm_mpi == "none" else slurm_mpi,
                  container_env=container_env, env_prefix=f"{runtime.upper()}ENV_")


def module_files(version, tcl) -> dict:
    """{entry in modulefiles/NAME: the file in the version's folder it links to}"""
    return {f"{version}.lua": "module.lua", **({version: "module.tcl"} if tcl else {})}


def _link_target(name, version, file):
    """Relative, from PREFIX/modulefiles/NAME/: a prefix copied or moved whole still works."""
    return f"../../{name}/{version}/{file}"


def _assemble(staging, image, site, module, labels, files, target_name, report):
    """Fill the staging folder; return the sha256 of the image as copied."""
    checksum = copy_hashed(image, staging / "image.sif")
    bin_dir = staging / "bin"
    (bin_dir / "sites").mkdir(parents=True)
    shutil.copyfile(resources.wrapper(), bin_dir / "singularity_wrapper")
    os.symlink("singularity_wrapper", bin_dir / "apptainer_wrapper")
    (bin_dir / "sites" / f"{site.name}.sh").write_text(render_site(site))
    for command in ENTRY_POINTS:
        (bin_dir / command).write_text(
            render_entry(command, f"{module.name}/{module.version}", site.name))
    recipe = json.loads(labels.get("recipe", "{}"))
    (staging / "recipe.json").write_text(json.dumps(recipe, indent=2, sort_keys=True) + "\n")
    if report is not None:
        shutil.copyfile(report, staging / "smoke.json")
    # Both, with or without --tcl: a Tcl link left by an earlier publish never dangles.
    (staging / "module.lua").write_text(render_lua(module))
    (staging / "module.tcl").write_text(render_tcl(module))
    manifest = {"name": module.name, "version": module.version, "target": target_name,
                "site": site.name, "builder_version": __version__,
                "published": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "image_sha256": checksum, "recipe_sha256": labels.get("recipe.sha256"),
                "smoke": "skipped" if report is None else "passed",
                "modules": files}
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    _set_modes(staging)
    lines = [f"{checksum}  image.sif"]
    lines += [f"{sha256_file(p)}  {p.relative_to(staging)}"
              for p in sorted(staging.rglob("*"))
              if p.is_file() and not p.is_symlink() and p.name != "image.sif"]
    (staging / SUMS).write_text("\n".join(lines) + "\n")
    os.chmod(staging / SUMS, 0o644)
    os.chmod(staging, 0o755)
    return checksum


def _set_modes(folder: Path):
    """World-readable, writable by the owner only, whatever the umask."""
    for path in folder.rglob("*"):
        if path.is_symlink():
            continue
        executable = path.is_dir() or path.parent.name == "bin"
        os.chmod(path, 0o755 if executable else 0o644)


RENAME_EXCHANGE = 2
AT_FDCWD = -100


def _move_into_place(staging: Path, root: Path):
    """Rename the staged folder to ``root``; an existing one is swapped out in one step where
    the file system can, else in two renames that `recover` completes backwards."""
    if not root.exists():
        os.rename(staging, root)
        faults.point("publish:new-moved-in")
        return
    if not faults.no_rename_exchange() and _exchange(staging, root):
        faults.point("publish:exchanged")
        old = staging                          # now holds the replaced version
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
        print(f"note: part of the replaced version is still in {old} (files in use?); "
              "the next publish of this name removes it")
    faults.point("publish:old-removed")


def _exchange(first: Path, second: Path) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    return renameat2 is not None and renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD,
                                               os.fsencode(second), RENAME_EXCHANGE) == 0


def _symlink_atomic(target: str, path: Path):
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


def _make_dirs(*folders):
    """Create missing folders as rwxr-xr-x whatever the umask; existing ones are left be."""
    for folder in folders:
        missing = [p for p in [folder, *folder.parents] if not p.exists()]
        for path in reversed(missing):
            path.mkdir(exist_ok=True)
            path.chmod(0o755)


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
                    raise CheckFailed(f"{path}: another publish of {folder.name} has held it for "
                                      f"over {wait} s; wait for it to end, or end it") from None
                if not told:
                    print(f"waiting for another publish of {folder.name} to end ({path})",
                          flush=True)
                    told = True
                time.sleep(0.2)
        yield


# .VERSION.partial-XXXXXXXX (staging, or after an exchange the replaced version) and
# .VERSION.old-XXXXXXXX (the replaced version, in the fallback's two renames)
LEFTOVER = re.compile(r"\.(?P<version>.+)\.(?P<kind>partial|old)-[a-z0-9_]{8}")
TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")       # write_atomic's, _symlink_atomic's


def recover(folder: Path, modules: Path) -> list:
    """Undo or finish what killed publishes of this name left; the caller holds the lock, so
    none is running. A version found only in .VERSION.old-* (killed between the fallback's two
    renames) is renamed back; every other hidden folder is garbage: staging, or a replaced
    version. Module file links are made to match each version's publish.json, and those of a
    version that is not there (killed before it was moved in) removed. One line per change."""
    done = []
    found = [(path, match) for path in sorted(folder.iterdir())
             if (match := LEFTOVER.fullmatch(path.name)) and path.is_dir() and not path.is_symlink()]
    for path, match in found:
        root = folder / match["version"]
        if match["kind"] == "old" and not os.path.lexists(root):
            os.rename(path, root)
            done.append(f"restored {root} from {path.name}, "
                        "where an interrupted publish had moved it")
    for path, _ in found:
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
            done.append(f"removed {path} (left by an interrupted publish)" if not path.exists()
                        else f"note: could not remove all of {path} (files in use?)")
    if not modules.is_dir():
        return done
    for entry in sorted(modules.iterdir()):
        if TEMPORARY.fullmatch(entry.name):
            entry.unlink(missing_ok=True)
        elif entry.is_symlink() and not entry.exists():
            match = LINK.fullmatch(os.readlink(entry))
            if match and match["name"] == folder.name and not (folder / match["version"]).exists():
                entry.unlink()
                done.append(f"removed {entry} (a module file of {folder.name}/"
                            f"{match['version']}, which an interrupted publish did not move in)")
    for root in sorted(folder.iterdir()):
        files = listed_modules(root)
        if files is not None and not root.name.startswith("."):
            done += _fix_modules(modules, folder.name, root.name, files)
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
        return None                     # never a link out of the version's folder
    return files


def module_fixes(modules: Path, name, version, files) -> list:
    """[(entry, link target or None to remove)] that make the version's module files the ones
    it was published with: a link for each, nothing else under its names."""
    fixes = []
    for entry in (f"{version}.lua", version):
        path = modules / entry
        if entry in files:
            target = _link_target(name, version, files[entry])
            if not path.is_symlink() or os.readlink(path) != target:
                fixes.append((entry, target))
        elif os.path.lexists(path):
            fixes.append((entry, None))
    return fixes


def _fix_modules(modules: Path, name, version, files) -> list:
    done = []
    for entry, target in module_fixes(modules, name, version, files):
        if target is None:
            (modules / entry).unlink()
            done.append(f"removed {modules / entry} (not published with {name}/{version})")
        else:
            _symlink_atomic(target, modules / entry)
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
    except OSError as error:           # not the owner: say so, and check what is there
        print(f"note: an interrupted publish left {folder.name}/{root.name} unfinished in "
              f"{folder} ({error.strerror}); run verify or publish as its owner to finish it")
        return
    for line in done:
        print(line)


def _interrupted(root: Path, modules: Path) -> bool:
    folder, version = root.parent, root.name
    if not folder.is_dir():
        return False
    if any((match := LEFTOVER.fullmatch(path.name)) and match["version"] == version
           for path in folder.iterdir()):
        return True
    files = listed_modules(root)
    if files is not None:
        return bool(module_fixes(modules, folder.name, version, files))
    return not root.exists() and any(path.is_symlink() and not path.exists()
                                     for path in (modules / f"{version}.lua", modules / version))
