"""`hpcml extend TARGET DOCKERFILE`: build the layer render.extension planned on a built
image as the target's own layers are built (layers.build_layer): into a temporary file
renamed at the end, logged, keyed on the definition, the base image and the files it
copies, so a second run with nothing changed answers "up to date".

Example: build_extension(built, plan_extension(tree, built.target, Path("project/Dockerfile"),
"cpu-project"), images=Path("images"), progress=Progress()) -> Path("images/cpu-project.sif")
"""

import hashlib
import shutil
import tarfile
from pathlib import Path

from .. import runner
from ..fileio import sha256_file, write_atomic
from ..host import build_route, emulation, sidecar
from ..host.images import checked_labels, image_lock
from ..host.which_apptainer import find_apptainer
from ..render.parts import PYENV_TAR
from .layers import LayerBuild, build_layer


def build_extension(built, extension, *, images: Path, progress) -> Path:
    """built: host.images.Built, the image to start from; extension: render.extension.Extension."""
    target, plan = built.target, extension.plan
    sif = images / f"{plan.owner}.sif"
    route = build_route.check(target.sites[0])  # no way to build here: one line, nothing written
    apptainer, label = find_apptainer(target.sites[0], progress, images)
    checked_labels(apptainer, built)  # the base is the target it names, before anything is written
    with image_lock(images, target.name, shared=True), image_lock(images, plan.owner):
        key = _key(plan.text, built.path, extension.folder, extension.files, extension.pyenv)
        if sidecar.is_current(sif, key):
            print(f"{sif} is up to date")
            return sif
        write_atomic(images / plan.file_name, plan.text)  # for the user to read; the build takes the plan
        context = _stage_files(images / extension.context, extension.folder, extension.files)
        try:
            if extension.pyenv:
                _env_tar(extension.pyenv, context)
            log = images / f"{plan.owner}.build.log"
            progress.step(f"building {sif} on {built.path} ({label}; log: {log})")
            emulated = target.arch != emulation.host_arch()
            job = LayerBuild(plan, apptainer, sif, key, {"BASE": built.path.name}, log, emulated=emulated, route=route)
            build_layer(job, progress)
        finally:
            shutil.rmtree(context, ignore_errors=True)
    progress.step(f"built {sif}: {target.name} and what it adds; its %test passed")
    return sif


def _env_tar(env: Path, context: Path):
    """The env's files, as its squashfs holds them (links kept), as one tar in the context."""
    unpacked = context / "pyenv-unpacked"
    runner.run(["unsquashfs", "-no-progress", "-d", str(unpacked), str(env)], timeout=600)
    with tarfile.open(context / PYENV_TAR, "w") as tar:
        for path in sorted(unpacked.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(unpacked)), recursive=False)
    shutil.rmtree(unpacked)


def _key(text, base: Path, folder: Path, files, pyenv=None) -> str:
    """The definition, the base image (its layer key, else its size and time), the bytes
    of every file the layer copies and of the env it bakes in."""
    recorded = sidecar.current_key(base)
    stat = base.stat()
    parts = [text, recorded or f"{stat.st_size}:{stat.st_mtime_ns}"]
    parts += [f"pyenv {sha256_file(pyenv)}"] if pyenv else []
    for source, _ in files:
        found = folder / source
        inside = sorted(found.rglob("*")) if found.is_dir() else [found]
        parts += [f"{p.relative_to(folder)} {sha256_file(p)}" for p in inside if p.is_file()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _stage_files(context: Path, folder: Path, files) -> Path:
    """The files the layer copies, under the images folder (which every runtime, the
    toolbox included, can see), at the relative paths the definition names."""
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir(parents=True)
    for source, _ in files:
        found, placed = folder / source, context / source
        placed.parent.mkdir(parents=True, exist_ok=True)
        if found.is_dir():
            shutil.copytree(found, placed, symlinks=True)
        else:
            shutil.copy2(found, placed)
    return context
