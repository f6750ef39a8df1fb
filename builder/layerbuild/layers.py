"""Build images/<target>.sif with Apptainer, layer by layer, from render's layer plan:
cached by content (layerbuild.store), written atomically, logged.

Each image is written to a temporary file beside it and renamed at the end; a failed,
interrupted or killed build (a guard process cleans up even after SIGKILL) leaves the old
image as it was.
"""

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import contract, fileio, reproducible, runner, sbom
from ..host import build_route, cache, debootstrap_kit, emulation, hostinfo, pip_indexes, sidecar, space
from ..host.images import image_lock
from ..host.which_apptainer import takes_squashfs_args
from ..render import runtime_wheel
from ..render.layer_sharing import plan_layers
from ..render.parts import CROSS_DIR, CROSS_MOUNT, HOST_MOUNT
from ..render.plan import LAYERS, MIRROR_ARG, SECURITY_MIRROR_ARG, in_order
from . import build_log, from_bundle, host_settings, packing, sources, store, unpacked

WORK_PREFIX = "hpcml-build-"  # a build's work folder under the build space's tmp


@dataclass(frozen=True)
class LayerBuild:
    """One `apptainer build` of a layer. Example: LayerBuild(plan=plans["image"], apptainer=
    "apptainer", sif=Path("images/cpu.sif"), key=keys["image"], args={"DEVEL": "cpu.devel.sif",
    "BASE": "cpu.base.sif"}, log=Path("images/cpu.image.build.log"), route=build_route.check())."""

    plan: object  # render.plan.LayerPlan
    apptainer: str  # the apptainer or singularity command
    sif: Path  # the image it writes
    key: str  # recorded beside it (host/sidecar.py)
    args: dict  # build arguments: parents by file name, host values
    log: Path
    reuse_kept: bool = True  # kept step outputs from the user's cache (False: remake them)
    where: object = None  # space.Folders the build writes in; beside the image if None
    emulated: bool = False  # another architecture than the host's: %test's preflight expects QEMU
    cross: Path = None  # x86-64 compilers for the image's arch (host.cross_tools), bound at CROSS_MOUNT
    path: str = None  # PATH for Apptainer when the builder's own debootstrap goes first on it
    bundle: object = None  # from_bundle.Bundle the layer takes every file from, or None
    apt_mirrors: tuple = ()  # (mirror, security mirror) of this build for a Debian root's apt
    route: build_route.Route = None  # how this host builds: its flags, and who runs the steps


def build(tree, name, *, images: Path, force=None, progress, space_check=True, bundle=None):
    """Build the target's layers in order, skipping each one whose key is unchanged.

    force: None, "top" (rebuild the image layer on the layers below as they are) or "all".
    space_check: refuse to start when the layers will not fit (space.check_fits).
    bundle: a source bundle's folder to take every file from, with no network (from_bundle)."""
    forced = {None: (), "top": ("image",), "all": LAYERS}[force]
    target = tree.target(name)
    route = build_route.check(target.sites[0], target)  # no way to build it here: one line, nothing written
    name = target.name  # an alias builds its target's image
    plans = plan_layers(tree, name)  # devel and base may be another target's, built and locked as its
    if target.site_image:  # before anything is asked or written: the site's image is here
        sources.check_site_image(target.site_image)
    bundle = from_bundle.opened(tree, name, bundle)  # read back and matched to the locks first
    host_args = _host_args(plans)
    paths = store.layer_paths(images, plans)
    # asked before the keys: a layer built without one of its indexes is keyed so
    down = [] if bundle else pip_indexes.indexes_down([url for plan in plans.values() for url in plan.pip_indexes])
    keys = store.layer_keys(plans, from_bundle.key_args(bundle, host_args), down)
    if not forced and sidecar.is_current(paths["image"], keys["image"]):
        return _up_to_date(target, paths["image"], keys["image"], progress, route)
    # before anything is written or pulled: what the layers to build fetch answers
    order = in_order(plans)
    planned = [layer for layer in order if store.step(plans[layer], forced, paths[layer], keys[layer]) == "build"]
    cross = sources.check_inputs(tree, target, plans, planned, down, progress, bundle)  # None: no x86-64 compilers
    images.mkdir(parents=True, exist_ok=True)
    where = space.folders(images)
    with contextlib.ExitStack() as locks:
        host_args = locks.enter_context(from_bundle.build_args(bundle, host_args))
        for owner in dict.fromkeys(plan.owner for plan in plans.values()):
            locks.enter_context(image_lock(images, owner))
            _remove_stale_temps(images, where, owner)
        # made under the lock, so it holds for the loop below (no other build of these layers)
        steps = {layer: store.step(plans[layer], forced, paths[layer], keys[layer]) for layer in order}
        if space_check:
            _check_space(tree, name, plans, paths, steps, where)
        apptainer, label = from_bundle.find_apptainer(bundle, host_args, target.sites[0], progress, images)
        if "devel" in plans and plans["devel"].owner != name:
            progress.step(
                f"{name} builds on the devel and base layers of {plans['devel'].owner} "
                "(they differ only in the GPU archs, which the image layer compiles for)"
            )
        for layer in order:
            plan, sif = plans[layer], paths[layer]
            if _reused(plan, steps[layer], sif, keys[layer], where, progress):
                continue
            # parents by file name, the build running in their folder: Apptainer records the
            # From: line in a label, and an absolute path there is a fact of this machine
            args = {arg: paths[parent].name for arg, parent in plan.parent_args().items()}
            args.update(store.used_args(plan, host_args))
            log = images / f"{plan.owner}.{layer}.build.log"
            progress.step(f"building the {layer} layer {sif} with {label}{route.under} (log: {log})")
            host = _host_fields(target, plan, cross, label, progress, host_args, bundle, route)
            job = LayerBuild(plan, apptainer, sif, keys[layer], args, log, force != "all", where, **host)
            build_layer(job, progress)
            store.keep(plan, keys[layer], sif, progress)
        progress.step(f"built {paths['image']} ({paths['image'].stat().st_size / 1e6:.0f} MB); its %test passed")
        sbom.ensure(target, paths["image"], keys["image"], progress, apptainer, _prober(route))  # under the lock
    return paths["image"]


def _up_to_date(target, image, key, progress, route):
    cache.store(target.name, "image", key, image)
    print(f"{image} is up to date")
    sbom.ensure(target, image, key, progress, proot=_prober(route))  # one made before SBOMs gets one
    return image


def _prober(route):
    """The proot the SBOM's probe runs under where Apptainer can run no image (the unpacked
    route: no user namespace); None elsewhere."""
    return shutil.which("proot") if route.proot_probe else None


def _host_fields(target, plan, cross, label, progress, host_args, bundle, route) -> dict:
    """LayerBuild's fields from this host and this build: whether it builds under QEMU, the
    x86-64 compilers its DeepSpeed step takes (None: its own), Apptainer's PATH with the
    builder's debootstrap first (or None; fetched from the build's mirror, so from the bundle
    when it builds from one), the bundle, the apt mirrors, and the build route."""
    emulated = target.arch != emulation.host_arch()
    mirror = host_args.get(MIRROR_ARG)
    path = None if label == "toolbox" else debootstrap_kit.search_path(plan.text, progress, mirror=mirror)
    return {
        "emulated": emulated,
        "cross": cross if emulated and CROSS_MOUNT in plan.text else None,
        "path": path,
        "bundle": bundle,
        "apt_mirrors": _apt_mirrors(host_args),
        "route": route,
    }


def _host_args(plans) -> dict:
    """The build arguments this host supplies: its Debian mirrors, to the layers that use them."""
    used = {arg for plan in plans.values() for arg in plan.build_args}
    mirrors = {MIRROR_ARG: hostinfo.debian_mirror, SECURITY_MIRROR_ARG: hostinfo.security_mirror}
    return {arg: mirror() for arg, mirror in mirrors.items() if arg in used}


def _apt_mirrors(host_args) -> tuple:
    """This build's Debian mirrors for every layer's apt, not only the layer that takes them
    as build arguments: a lower layer may hold an earlier build's (); () for other roots."""
    if MIRROR_ARG not in host_args:
        return ()
    return host_args[MIRROR_ARG], host_args.get(SECURITY_MIRROR_ARG, "")


def _check_space(tree, name, plans, paths, steps, where):
    """Refuse to start when the layers to make will not fit (space.check_fits)."""
    sizes = {
        layer: space.layer_size(tree.target(plan.owner), layer, paths[layer], cache.slot(plan.owner, layer))
        for layer, plan in plans.items()
    }
    space.check_fits(name, steps, sizes, where)


def _reused(plan, step, sif, key, where, progress) -> bool:
    """True when the layer is there already ("current") or came back from the user's cache."""
    if step == "current":
        store.keep(plan, key, sif, progress)
        progress.step(f"{plan.layer} layer {sif} is up to date")
        return True
    with space.naming_full("the images folder", where.images):
        # False also when a concurrent build pruned it since the plan: built then
        fetched = step == "fetch" and cache.fetch(plan.owner, plan.layer, key, sif)
    if fetched:
        sidecar.write(sif, key)
        progress.step(f"{plan.layer} layer {sif} taken from the cache ({cache.cache_dir()})")
    return fetched


def build_layer(job: LayerBuild, progress):
    """Build one layer into ``job.sif`` atomically and record its key beside it. Kept step
    outputs come from the user's cache unless ``job.reuse_kept`` is False, and go back into
    it once complete, whether or not the rest of the build succeeds, recorded as the layer
    owner's. The build's temporary folder holds this build's own folder, Apptainer's
    temporary files included, removed at the end."""
    where = job.where or space.folders(job.sif.parent)
    where.tmp.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{job.plan.owner}-", dir=where.tmp))
    (work / "apptainer").mkdir()
    tmp_sif = job.sif.with_name(f".{job.sif.name}.tmp-{os.getpid()}")
    host, kept, site_image = work / "host", [], None
    try:
        definition = work / job.plan.file_name
        definition.write_text(job.plan.text)
        args = dict(job.args)
        if runtime_wheel.BUILD_ARG in job.plan.build_args:
            # under the work folder, which the toolbox can see; the .def checks its sha256
            wheel = runtime_wheel.current()
            wheel.write(work)
            args[runtime_wheel.BUILD_ARG] = str(work / wheel.name)
        host_settings.write(host, job.plan.pip_indexes, progress, offline=bool(job.bundle), apt_mirrors=job.apt_mirrors)
        site_image = store.site_image_facts(job.plan.site_image) if job.plan.site_image else None
        kept = store.provide_kept(host, job.plan.kept, job.reuse_kept, site_image)
        compressed = job.plan.layer not in store.INTERMEDIATE  # a layer only the next one reads is not
        pack_as = packing.for_layer(job, args, compressed, (job.sif.parent.resolve(), work, where.tmp))
        if job.route.runs_steps:
            unpacked.run_layer(job, args, _binds(job, host), work / "unpacked", tmp_sif, progress, pack_as)
        else:
            built = work / "apptainer.sif"
            _run_apptainer(job, _argv(job, args, host, built, definition), work, built, where, progress)
            progress.step(f"packing the {job.plan.layer} layer the same way on every route (unsquashfs, mksquashfs)")
            with build_log.said_in_one_line(job.log, where, "packing the layer"):
                packing.repack(pack_as, built, tmp_sif, work)
        os.replace(tmp_sif, job.sif)
    finally:
        store.store_kept(host, kept, job.plan.owner, site_image)
        tmp_sif.unlink(missing_ok=True)
        fileio.remove_tree(work)  # an unpacked image's 555 folders too
        if where.tmp == job.sif.parent.resolve() / space.DEFAULT_TMP:
            with contextlib.suppress(OSError):  # ours, and empty unless another build runs
                where.tmp.rmdir()
    sidecar.write(job.sif, job.key)


def _argv(job, args, host, built, definition) -> list:
    squashfs = packing.UNCOMPRESSED if takes_squashfs_args(job.apptainer) else ()  # packing.py compresses, once
    binds = [f"{source}:{inside}" + (":ro" if inside != HOST_MOUNT else "") for source, inside in _binds(job, host)]
    return job.route.build_argv(job.apptainer, args, binds, built.absolute(), definition, squashfs)


def _binds(job, host) -> list:
    """(host folder, its path in the image) of what %post sees: the host settings, the cross
    compilers and the bundle's Python files (on their mount points in the host folder)."""
    binds = [(host, HOST_MOUNT)]
    if job.cross:
        (host / CROSS_DIR).mkdir(exist_ok=True)
        binds.append((job.cross, CROSS_MOUNT))
    if job.bundle:
        (host / from_bundle.PYTHON_DIR).mkdir(exist_ok=True)
        binds.append((job.bundle.python, from_bundle.PYTHON_MOUNT))
    return binds


def _run_apptainer(job, argv, work, built, where, progress):
    """The build, in the images folder; a full disk, or the reason a block gave, in one line."""
    where.apptainer_cache.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, **where.env(work / "apptainer"))
    env.update(reproducible.ENV)  # debootstrap's and mksquashfs's time, not the day's
    seen = (job.sif.parent.resolve(), work, where.apptainer_cache, *([job.cross] if job.cross else []))
    seen += (job.bundle.folder,) if job.bundle else ()
    env[contract.TOOLBOX_BINDS] = ":".join(map(str, seen))
    if job.emulated:  # Apptainer hands the build's environment to %test
        env[contract.ALLOW_EMULATION] = "1"
    env.update({"PATH": job.path} if job.path else {})
    env.update(from_bundle.environment() if job.bundle else {})
    job.log.write_text("")
    with build_log.said_in_one_line(job.log, where, "apptainer build"):
        runner.run_logged(
            argv,
            job.log,
            cwd=job.sif.parent.resolve(),
            env=env,
            what="apptainer build",
            note="; the previous image, if any, is unchanged",
            cleanup=[built, work],
            on_line=build_log.progress_lines(progress),
        )


def _remove_stale_temps(images, where, name):
    # left behind only if the guard itself was killed; the lock says no build is running
    for stale in images.glob(f".{name}.*sif.tmp-*"):
        stale.unlink(missing_ok=True)
    for stale in where.tmp.glob(f"{WORK_PREFIX}{name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
