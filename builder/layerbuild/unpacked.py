"""The build that needs no privilege at all (issue 67): on a host where Apptainer can make no
user namespace and the user has no subuid range (LUMI, with Apptainer), the builder does
what `apptainer build` does for a definition whose stages start from an image, as cotainr
does, in folders the user owns:

  1. unpack each stage's image (`Bootstrap: localimage`) with unsquashfs at its root
     partition's offset (host/sif.py): no mount, no namespace;
  2. copy `%files from STAGE` (links inside kept, as Apptainer's tar copy) and `%files`
     (`cp -fLr`, as Apptainer's);
  3. run %post under `proot -0` (root to the steps, the user to the kernel), with the
     image's environment sourced, a clean environment, $APPTAINER_LABELS, and the build's
     binds: the host folder at /mnt, the cross compilers and the bundle's wheels;
  4. write /.singularity.d/ (sandbox_files.py), then run %test under proot with a private
     /tmp and home, bytecode off (Apptainer's %test sees a read-only image);
  5. pack the last stage as every route does (packing.py): mksquashfs with the owners in a
     pseudo file, and a SIF assembled with `apptainer sif`: none of it needs a namespace.

proot must translate statx (5.2 and later): with an older one an image's coreutils see the
host's files (host/build_route.py checks it). Example: build(Steps(...), text, work, out).
"""

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import contract, runner
from ..errors import ToolError
from ..host import route_facts, sif
from ..render import def_reader
from . import build_log, packing, sandbox_files

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Apptainer's
SYSTEM_BINDS = ("/proc", "/dev", "/sys", "/etc/resolv.conf", "/etc/hosts")
SOURCE_ENV = 'for script in /.singularity.d/env/*.sh; do if [ -f "$script" ]; then . "$script"; fi; done'
MARKER = "--- unprivileged: "  # the builder's own steps in the log, shown as progress (build_log)
TIMEOUT_S = 8 * 3600  # a step compiles DeepSpeed's ops under ptrace: hours, not days


@dataclass(frozen=True)
class Steps:
    """How this build runs: the commands, its log, the folder a relative From: is in."""

    apptainer: str  # for `sif list`, `inspect` and `sif add`: none needs a namespace
    proot: str
    log: Path
    images: Path  # where `From: cpu.devel.sif` is
    binds: tuple = ()  # (host path, path in the image) for %post and %test
    proot_env: dict = field(default_factory=dict)  # host.route_facts.proot_settings: what makes it translate statx
    test_env: dict = field(default_factory=dict)  # what %test sees besides its own settings
    on_line: object = None  # each log line, as the Apptainer build's
    apptainer_version: str = ""
    packing: object = None  # packing.Packing: how the last stage becomes the layer's SIF


def run_layer(job, args: dict, binds: list, work: Path, out: Path, progress, pack_as):
    """layers.LayerBuild ``job`` built this way into ``out``, logged as Apptainer's would be,
    packed as ``pack_as`` (a packing.Packing) says; a block's own reason for a failure in one line."""
    version = runner.run([job.apptainer, "--version"], timeout=60).stdout.split()
    proot = shutil.which("proot")
    steps = Steps(
        apptainer=job.apptainer,
        proot=proot,
        proot_env=route_facts.proot_settings(proot) or {},
        log=job.log,
        images=job.sif.parent.resolve(),
        binds=tuple((str(source), inside) for source, inside in binds),
        test_env={contract.ALLOW_EMULATION: "1"} if job.emulated else {},
        on_line=build_log.progress_lines(progress),
        apptainer_version=version[-1] if version else "",
        packing=pack_as,
    )
    job.log.write_text("")
    try:
        build(steps, def_reader.substituted(job.plan.text, args), work, out)
    except ToolError as error:
        reason = build_log.failure_line(runner.tail(job.log, 40))
        if reason is None:
            raise
        raise ToolError(f"{reason}; the previous image, if any, is unchanged; log: {job.log}") from error


def build(steps: Steps, text: str, work: Path, out: Path):
    """Build the definition ``text`` (build arguments substituted) into ``out``, working in
    ``work`` (one folder per stage, removed by the caller)."""
    roots = {}
    work.mkdir(parents=True, exist_ok=True)
    for number, stage in enumerate(def_reader.stages(text)):
        root = work / f"stage-{number}"
        partition = sif.root_partition(steps.apptainer, _image(stage, steps.images))
        opened = _unpack(steps, partition, root)
        for source in stage.from_stages():
            if source not in roots:
                raise ToolError(f"the definition's %files from {source}: no earlier stage is named {source}")
            for path, dest in stage.files(source):
                _copy_from_stage(steps, roots[source], path, root, dest)
        for path, dest in stage.files():
            _copy_from_host(steps, path, root, dest)
        if stage.script("post").strip():
            _post(steps, root, stage.script("post"))
        sandbox_files.insert(root, stage, text, steps.apptainer_version)
        if stage.script("test").strip():
            _test(steps, root, work)
        roots[stage.name or str(number)] = root
    _pack(steps, root, (opened, sif.listing(partition)), work, out)


def _image(stage, images: Path) -> Path:
    if stage.header.get("bootstrap", "").lower() != "localimage":
        raise ToolError(
            f"stage {stage.name or '(unnamed)'} starts from {stage.header.get('bootstrap')!r}: a build "
            "without privilege starts only from an image file (Bootstrap: localimage)"
        )
    return images / stage.header.get("from", "")  # an absolute From: stays as it is


def _unpack(steps, partition, root: Path) -> list:
    """The image's files under ``root``; the modes opened for the user (sandbox_files)."""
    _say(steps, f"unpacking {partition.image} into a folder of yours (unsquashfs, no namespace)")
    sif.unpack(partition, root, steps.log)
    return sandbox_files.opened(root)  # a 555 folder of the image would stop %post and its removal


def _copy_from_host(steps, path: str, root: Path, dest: str):
    target = _inside(root, dest)
    target.parent.mkdir(parents=True, exist_ok=True)
    runner.run_logged(["cp", "-fLr", path, str(target)], steps.log, what=f"%files: copying {path}")


def _copy_from_stage(steps, source_root: Path, path: str, root: Path, dest: str):
    source, target = _inside(source_root, path), _inside(root, dest)
    if target.is_dir():
        target = target / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    runner.run_logged(["cp", "-a", "-H", str(source), str(target)], steps.log, what=f"%files from a stage: {path}")


def _inside(root: Path, path: str) -> Path:
    """``path`` of the image under ``root``: one line where a link or .. leads out of it."""
    joined = root / path.lstrip("/")
    real = Path(os.path.realpath(joined.parent)) / joined.name
    if real != root.resolve() and root.resolve() not in real.parents:
        raise ToolError(f"%files path {path!r}: leads out of the image (a link or ..); expected a path inside it")
    return real


def _post(steps, root: Path, script: str):
    post = root / ".post.script"
    post.write_text(script)
    env = {"PATH": DEFAULT_PATH, "HOME": "/root", "USER": "root", "LANG": "C"}
    env.update(APPTAINER_LABELS=sandbox_files.BUILD_LABELS, SINGULARITY_LABELS=sandbox_files.BUILD_LABELS)
    env.update(APPTAINER_ENVIRONMENT="/.singularity.d/env/91-environment.sh")
    try:
        _proot(steps, root, steps.binds, env, f"{SOURCE_ENV}; exec /bin/sh -e /.post.script", "%post")
    finally:
        post.unlink(missing_ok=True)


def _test(steps, root: Path, work: Path):
    scratch = {"/tmp": work / "test-tmp", "/root": work / "test-home"}
    for folder in scratch.values():
        folder.mkdir(exist_ok=True)
    env = {"PATH": DEFAULT_PATH, "HOME": "/root", "USER": "root", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    env.update(steps.test_env)
    binds = (*steps.binds, *((str(host), inside) for inside, host in scratch.items()))
    _proot(steps, root, binds, env, f"{SOURCE_ENV}; exec /.singularity.d/test", "%test")


def _proot(steps, root: Path, binds, env: dict, command: str, what: str):
    argv = [steps.proot, "-0", "--kill-on-exit", "-r", str(root), "-w", "/"]
    for path in SYSTEM_BINDS:
        if os.path.exists(path):
            argv += ["-b", path]
    for host, inside in binds:
        (root / inside.lstrip("/")).mkdir(parents=True, exist_ok=True)
        argv += ["-b", f"{host}:{inside}"]
    argv += ["/usr/bin/env", "-i", *(f"{name}={value}" for name, value in env.items()), "/bin/sh", "-c", command]
    env = dict(os.environ, **steps.proot_env)
    runner.run_logged(argv, steps.log, env=env, what=f"{what} under proot", on_line=steps.on_line, timeout=TIMEOUT_S)


def _pack(steps, root: Path, base: tuple, work: Path, out: Path):
    """The SIF of ``root`` as every route packs it (packing.py); ``base``: (opened modes, the
    base image's listing): its owners put back, root's for what the steps made."""
    _say(steps, "packing the image: mksquashfs, then the SIF's definition, metadata and root partition")
    opened, listing = base
    packing.pack(steps.packing, root, out, work, listing, opened)


def _say(steps, line: str):
    text = f"{MARKER}{line}"
    with open(steps.log, "a") as log:
        log.write(text + "\n")
    if steps.on_line:
        steps.on_line(text)
