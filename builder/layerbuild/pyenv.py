"""`hpcml env build TARGET LOCK`: a project env's lock (builder/pyenv_lock.py) installed on the
target's built image into one squashfs file beside it, with nothing of the image rebuilt and
no privilege: one `apptainer exec` of the image, then mksquashfs on the host.

- In the image, the image's own Python runs pyenv_inside.py: a venv at contract.PYENV_MOUNT (a
  folder of this host bound there) chained to the image's venv, the lock installed by the
  image's pip (--no-deps --require-hashes), `pip check`, the check script and the record.
  pip's sources and CA bundle are the host's, as `build` hands them to %post (host_settings),
  or a source bundle's alone (--bundle); its cache is the user's, so a rebuild takes no
  download.
- On the host: the folder packed by mksquashfs with fixed owners, times and order, so the same
  lock on the same image gives the same bytes; renamed into place at the end; its SBOM beside
  it (sbom/pyenv_document.py).

The lock must be the target's and made against the target's lock as it is now (one line
otherwise): the env then holds nothing the image holds.

Example: build(built, Path("requirements.cpu.lock"), out=None, bundle=None, progress=Progress())
-> Path("requirements.cpu.sqsh"), with requirements.cpu.sbom.json beside it.
"""

import json
import os
import shutil
import tempfile
from pathlib import Path

from .. import contract, fileio, pyenv_lock, reproducible, runner, sbom
from ..bundle import manifest, pyenv_part, python_part
from ..errors import RecipeError, ToolError, shown
from ..host import cache
from ..host.images import checked_labels, image_lock
from ..host.pyenv_file import RECORD
from ..host.which_apptainer import find_apptainer
from ..pyenv_lock import INSIDE
from ..render.parts import HOST_MOUNT, HOST_SETTINGS
from ..sbom import pyenv_document
from ..values.shell import cmd
from . import from_bundle, host_settings

SQSH = sbom.PYENV_SUFFIX
PIP_CACHE_MOUNT = "/var/cache/hpcml-pip"
# fixed owners, times and order: the same folder gives the same bytes; gzip, which every
# squashfs reader takes (the kernel's, squashfuse, unsquashfs)
PACKING = (
    "-noappend",
    "-all-root",
    "-no-xattrs",
    "-reproducible",
    "-comp",
    "gzip",
    "-all-time",
    str(reproducible.SOURCE_DATE_EPOCH),
    "-mkfs-time",
    str(reproducible.SOURCE_DATE_EPOCH),
)
TIMEOUT_S = 3 * 3600  # an sdist that compiles for long is still bounded


def default_out(lock_path: Path) -> Path:
    """requirements.cpu.lock -> requirements.cpu.sqsh, beside it."""
    return lock_path.with_suffix(SQSH)


def sbom_path(out: Path) -> Path:
    return sbom.pyenv_path_for(out)


def build(built, lock_path: Path, *, out=None, bundle=None, progress) -> Path:
    """built: host.images.Built, the image the env goes on."""
    target = built.target
    lock = pyenv_lock.load(lock_path)
    _check_lock(lock, target, lock_path)
    out = Path(out) if out else default_out(lock_path)
    if out.suffix != SQSH:
        raise RecipeError(f"--out {shown(str(out))}: expected a file name ending in {SQSH}", file="command line")
    bundle_python = _bundle_python(Path(bundle), lock) if bundle is not None else None
    apptainer, label = find_apptainer(built.site, progress, out.parent.resolve())
    checked_labels(apptainer, built)  # the image is the target the lock names
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.work-", dir=out.parent)).resolve()
    tmp_out = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    log = out.with_name(out.name.removesuffix(SQSH) + ".build.log")
    try:
        with image_lock(built.path.parent, target.name, shared=True):  # no build replaces it meanwhile
            progress.step(f"installing {len(lock.pins)} distributions on {built.path} ({label}; log: {log})")
            expected = lock.image_lock if lock.kind == pyenv_lock.IMAGE else "-"
            _install(apptainer, built, lock_path, work, log, bundle_python, expected)
        record = work / "env" / RECORD
        facts = json.loads(record.read_text())
        facts.update(lock_sha256=fileio.sha256_file(lock_path), pins_sha256=lock.digest(), python_lock=lock.image_lock)
        record.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
        progress.step(f"packing {out} (mksquashfs)")
        runner.run_logged(
            ["mksquashfs", str(work / "env"), str(tmp_out), *PACKING, "-no-progress", "-quiet"],
            log,
            what="mksquashfs (the env's file)",
            cleanup=[tmp_out, work],
        )
        document = pyenv_document.render(lock, facts, out.name)
        os.replace(tmp_out, out)
        fileio.write_atomic(sbom_path(out), document)
    finally:
        tmp_out.unlink(missing_ok=True)
        fileio.remove_tree(work)
    size = out.stat().st_size / 1e6
    progress.step(f"built {out} ({size:.1f} MB, python {facts['python']}); run with SING_PYENV={out}")
    return out


def _check_lock(lock, target, lock_path):
    if lock.target != target.name:
        raise RecipeError(
            f"the lock is for image {lock.target}, not {target.name}; lock your requirements for {target.name} "
            f"with: hpcml env lock {target.name} REQUIREMENTS",
            file=str(lock_path),
        )
    held = {pin.name: pin.version for step in getattr(target.python_lock, "steps", ()) for pin in step.pins}
    replaced = [f"{pin.name} (the image holds {held[pin.name]})" for pin in lock.pins if pin.name in held]
    if replaced:  # an env lock edited by hand
        raise RecipeError(
            f"the lock names distributions the image holds, which an env never replaces: {', '.join(replaced)}; "
            f"lock it again with: hpcml env lock {target.name} {lock.source or 'REQUIREMENTS'}",
            file=str(lock_path),
        )
    if lock.kind == pyenv_lock.IMAGE:  # the image's distributions: pyenv_inside checks them in the image
        return
    if not getattr(target.python_lock, "path", "") or pyenv_lock.lock_digest(target.python_lock) != lock.image_lock:
        raise RecipeError(
            f"the lock was made against another lock of {target.name} than recipes/locks/{target.name}/python.txt "
            f"now; lock it again with: hpcml env lock {target.name} {lock.source or 'REQUIREMENTS'}",
            file=str(lock_path),
        )


def _bundle_python(folder: Path, lock) -> Path:
    """The bundle's pyenv/ folder, once every file it lists is read back and it holds a file of
    every pin of the lock."""
    manifest.require(folder, f"hpcml bundle {lock.target} --pyenv LOCK --out {folder}")
    return pyenv_part.check(folder, manifest.check(folder), lock)


def _install(apptainer, built, lock_path, work, log, bundle_python, expected="-"):
    """The env in work/env, made by one exec of the image (pyenv_inside.py); ``expected``: the
    digest of the image's distributions a lock of a target without one was made against."""
    env_dir, host, tmp = work / "env", work / "host", work / "tmp"
    env_dir.mkdir()
    tmp.mkdir()
    python_lock = built.target.python_lock  # none for a target without a lock: no index of its own
    indexes = python_part.indexes(python_lock) if python_lock else ()
    host_settings.write(host, tuple(indexes), None, offline=bundle_python is not None)
    shutil.copyfile(lock_path, host / "pyenv.lock")
    shutil.copyfile(INSIDE, host / INSIDE.name)
    pip_cache = cache.cache_dir() / "pip"
    pip_cache.mkdir(parents=True, exist_ok=True)
    # /tmp a folder of the build's: --contain's own is small, and a compiling sdist writes there
    binds = [(env_dir, contract.PYENV_MOUNT, ""), (host, HOST_MOUNT, ":ro"), (tmp, "/tmp", "")]
    binds.append((pip_cache, PIP_CACHE_MOUNT, ""))
    if bundle_python is not None:
        (host / from_bundle.PYTHON_DIR).mkdir()
        binds.append((bundle_python, from_bundle.PYTHON_MOUNT, ":ro"))
    inside = [
        f"{built.target.python.venv}/bin/python",
        "-I",
        f"{HOST_MOUNT}/{INSIDE.name}",
        contract.PYENV_MOUNT,
        f"{HOST_MOUNT}/pyenv.lock",
        built.target.name,
        expected,
    ]
    script = f". {HOST_SETTINGS} && export PIP_CACHE_DIR={PIP_CACHE_MOUNT} TMPDIR=/tmp && exec {cmd(*inside)}"
    argv = [apptainer, "exec", "--contain", "--cleanenv"]
    for source, inside_path, options in binds:
        argv += ["--bind", f"{source}:{inside_path}{options}"]
    argv += [str(built.path.resolve()), "/bin/sh", "-c", script]
    env = dict(os.environ)
    for name, value in reproducible.ENV:  # what the image's pip and compilers see: no fact of this host
        env[f"APPTAINERENV_{name}"] = env[f"SINGULARITYENV_{name}"] = value
    seen = (work, built.path.parent.resolve(), pip_cache, *([bundle_python] if bundle_python else ()))
    env[contract.TOOLBOX_BINDS] = ":".join(map(str, seen))
    env.update(from_bundle.environment() if bundle_python else {})
    log.write_text("")
    try:
        runner.run_logged(argv, log, env=env, what="apptainer exec (the env's install)", timeout=TIMEOUT_S)
    except ToolError as error:
        lines = runner.tail(log, 40).splitlines()
        reason = next((line for line in reversed(lines) if line.startswith(contract.FAILURE_MARKER)), None)
        if reason is None:
            raise
        raise ToolError(f"{reason.removeprefix(contract.FAILURE_MARKER)}; nothing was written; log: {log}") from error
