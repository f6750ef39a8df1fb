"""Build images/<target>.sif with Apptainer, layer by layer: cached by content, written
atomically, logged.

A layer's key is a hash of its definition, its build arguments and the keys of the layers it
starts from; the sidecar file `<image>.sif.json` records it with the image's size and mtime,
so an unchanged target answers "up to date" without starting Apptainer, and the user's layer
cache supplies a layer built before under the same key. Each image is written to a temporary
file beside it and renamed at the end; a failed, interrupted or killed build (a guard process
cleans up even after SIGKILL) leaves the old image as it was.
"""

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from .. import __version__, runner
from ..errors import ToolError
from ..fileio import link_or_copy, write_atomic
from ..host import cache, hostinfo, space
from ..host.images import find_runtime, image_lock
from ..render import runtime_wheel
from ..render.blocks.build_host import SETTINGS
from ..render.blocks.torch import DOWN_VARIABLE
from ..render.definition import LAYERS, file_name
from ..render.layer_sharing import LOWER, layer_owner, render_layers
from ..render.parts import HOST_MOUNT, KEPT_DIR, KEPT_MOUNT, build_arg
from . import indexes

PARENTS = {"DEVEL": "devel", "BASE": "base"}          # build argument -> layer
# paths that differ between machines; what they hold is in the key already (parent keys, the
# runtime wheel's sha256 in the definition)
PATH_ARGS = frozenset(PARENTS) | {runtime_wheel.BUILD_ARG}
LAYER_PARENTS = {"devel": (), "base": ("devel",), "image": ("devel", "base")}
# Layers that never leave this machine: the next layer unpacks them again, so compressing
# them is time spent twice for nothing. Same content either way, so not part of the key.
INTERMEDIATE = ("devel", "base")
UNCOMPRESSED = "-noI -noD -noF -noX"      # no compression of inodes, data, fragments, xattrs
WORK_PREFIX = "hpcml-build-"           # a build's work folder under the build space's tmp
_KEPT_FOLDER = re.compile(rf"^kept={re.escape(KEPT_MOUNT)}/([A-Za-z0-9_.-]+)$", re.M)


def build_key(text, args, parent_keys=(), shipped=False):
    """What a layer is made of: its definition, its build arguments (less the paths of the
    layers it starts from) and the keys of those layers. A shipped layer's key also says that
    its parent is named by file name in its labels (images built before named it by absolute
    path, a fact of the build machine, and must not be taken from the cache)."""
    material = {"builder": __version__, "definition": text, "parents": list(parent_keys),
                "build_args": {k: v for k, v in args.items() if k not in PATH_ARGS}}
    if shipped:
        material["from_label"] = "file name"
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def is_current(sif: Path, key: str) -> bool:
    try:
        meta = json.loads(_meta_path(sif).read_text())
        stat = sif.stat()
    except (OSError, ValueError):
        return False
    return (meta.get("key") == key and meta.get("size") == stat.st_size
            and meta.get("mtime_ns") == stat.st_mtime_ns)


def used_args(text: str, args: dict) -> dict:
    """The build arguments a definition uses; Apptainer refuses unused ones."""
    return {name: value for name, value in args.items() if build_arg(name) in text}


def layer_keys(texts: dict, args: dict) -> dict:
    """{layer: key}; a layer's key covers the keys of the layers it starts from."""
    keys = {}
    for layer in LAYERS:
        keys[layer] = build_key(texts[layer], used_args(texts[layer], args),
                                [keys[p] for p in LAYER_PARENTS[layer]], shipped=layer not in INTERMEDIATE)
    return keys


def layer_paths(images: Path, owners: dict) -> dict:
    """{layer: image file}; owners: {layer: the target whose layer it is}."""
    return {layer: images / file_name(owners[layer], layer).replace(".def", ".sif") for layer in LAYERS}


def build(tree, name, *, images: Path, force=None, progress, space_check=True):
    """Build the target's layers in order, skipping each one whose key is unchanged.

    force: None, "top" (rebuild the image layer on the layers below as they are) or "all".
    space_check: refuse to start when the layers will not fit (space.check_fits)."""
    forced = {None: (), "top": ("image",), "all": LAYERS}[force]
    target = tree.target(name)
    name = target.name                                  # an alias builds its target's image
    texts = {layer: text for layer, (_, text) in render_layers(tree, name).items()}
    # devel and base may be another target's (layer_sharing): built, cached and locked as its
    owners = {layer: layer_owner(tree, name) if layer in LOWER else name for layer in LAYERS}
    mirror = {"MIRROR": hostinfo.debian_mirror()} if any("{{ MIRROR }}" in t for t in texts.values()) else {}
    paths = layer_paths(images, owners)
    keys = layer_keys(texts, mirror)
    if not forced and is_current(paths["image"], keys["image"]):
        cache.store(name, "image", keys["image"], paths["image"])
        print(f"{paths['image']} is up to date")
        return paths["image"]
    images.mkdir(parents=True, exist_ok=True)
    where = space.folders(images)
    with contextlib.ExitStack() as locks:
        for owner in dict.fromkeys(owners.values()):
            locks.enter_context(image_lock(images, owner))
            _remove_stale_temps(images, where, owner)
        # made under the lock, so it holds for the loop below (no other build of these layers)
        plan = {layer: _step(layer, forced, paths[layer], owners[layer], keys[layer])
                for layer in LAYERS}
        if space_check:
            sizes = {layer: space.layer_size(tree.target(owners[layer]), layer, paths[layer],
                                             cache.slot(owners[layer], layer)) for layer in LAYERS}
            space.check_fits(name, plan, sizes, where)
        runtime, label = find_runtime(target.sites[0], progress, images)
        if owners["devel"] != name:
            progress.step(f"{name} builds on the devel and base layers of {owners['devel']} "
                          "(they differ only in the GPU archs, which the image layer compiles for)")
        for layer in LAYERS:
            sif = paths[layer]
            owner = owners[layer]
            if plan[layer] == "current":
                _keep(owner, layer, keys[layer], sif, progress)
                progress.step(f"{layer} layer {sif} is up to date")
                continue
            with space.naming_full("the images folder", where.images):
                # False also when a concurrent build pruned it since the plan: built then
                fetched = plan[layer] == "fetch" and cache.fetch(owner, layer, keys[layer], sif)
            if fetched:
                _write_meta(sif, keys[layer])
                progress.step(f"{layer} layer {sif} taken from the cache ({cache.cache_dir()})")
                continue
            # parents by file name, the build running in their folder: Apptainer records the
            # From: line in a label, and an absolute path there is a fact of this machine
            args = dict(mirror)
            args.update({arg: paths[parent].name for arg, parent in PARENTS.items()
                         if parent in LAYER_PARENTS[layer]})
            args = used_args(texts[layer], args)
            log_path = images / f"{owner}.{layer}.build.log"
            progress.step(f"building the {layer} layer {sif} with {label} (log: {log_path})")
            build_layer(runtime, texts[layer], sif, keys[layer], args, log_path, progress,
                        packed=layer not in INTERMEDIATE, reuse_kept=force != "all", owner=owner,
                        where=where)
            _keep(owner, layer, keys[layer], sif, progress)
    stat = paths["image"].stat()
    progress.step(f"built {paths['image']} ({stat.st_size / 1e6:.0f} MB); its %test passed")
    return paths["image"]


def build_layer(runtime, text, sif, key, args, log_path, progress, packed=True, reuse_kept=True,
                owner="", where=None):
    """Build one definition into ``sif`` atomically; record ``key`` beside it. ``packed``
    False writes the squashfs uncompressed, for a layer only the next layer reads. Kept step
    outputs come from the user's cache unless ``reuse_kept`` is False, and go back into it
    once complete, whether or not the rest of the build succeeds, recorded as ``owner``'s.
    ``where``: the folders the build writes in (space.folders); its temporary folder holds
    this build's own folder, Apptainer's temporary files included, removed at the end."""
    where = where or space.folders(sif.parent)
    where.tmp.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{owner or 'layer'}-", dir=where.tmp))
    (work / "apptainer").mkdir()
    tmp_sif = sif.with_name(f".{sif.name}.tmp-{os.getpid()}")
    host, kept = work / "host", []
    try:
        definition = work / sif.name.replace(".sif", ".def")
        definition.write_text(text)
        if build_arg(runtime_wheel.BUILD_ARG) in text:
            # under the work folder, which the toolbox can see; the .def checks its sha256
            wheel = runtime_wheel.current()
            wheel.write(work)
            args = dict(args, **{runtime_wheel.BUILD_ARG: str(work / wheel.name)})
        _write_host_settings(host, text, progress)
        kept = _provide_kept(host, text, reuse_kept)
        argv = [runtime, "build"]
        if not packed and _takes_squashfs_args(runtime):
            argv += ["--mksquashfs-args", UNCOMPRESSED]
        if hostinfo.needs_fakeroot():
            argv.append("--fakeroot")
        for arg, value in sorted(args.items()):
            argv += ["--build-arg", f"{arg}={value}"]
        argv += ["--bind", f"{host}:{HOST_MOUNT}", str(tmp_sif.absolute()), str(definition)]
        where.apptainer_cache.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **where.env(work / "apptainer"), HPCML_TOOLBOX_BINDS=":".join(
            map(str, (sif.parent.resolve(), work, where.apptainer_cache))))
        log_path.write_text("")
        try:
            runner.run_logged(argv, log_path, cwd=sif.parent.resolve(), env=env,
                              what="apptainer build", note="; the previous image, if any, is unchanged",
                              cleanup=[tmp_sif, work], on_line=_progress_lines(progress))
        except ToolError as error:
            full = space.full_folder(runner.tail(log_path, 40), where)
            if full is None:
                raise
            raise ToolError(f"apptainer build {space.ran_out(*full)}; the previous image, if any, "
                            f"is unchanged and the partial files are removed; log: {log_path}") from error
        os.replace(tmp_sif, sif)
    finally:
        # a step that finished is kept even when a later one (or %test) failed: the next
        # build repeats only what broke (store_kept takes only outputs marked complete)
        for folder in kept:
            with contextlib.suppress(OSError):     # a cache that cannot grow hides no error
                cache.store_kept(folder, host / KEPT_DIR / folder, owner=owner)
        tmp_sif.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
        if where.tmp == sif.parent.resolve() / space.DEFAULT_TMP:
            with contextlib.suppress(OSError):     # ours, and empty unless another build runs
                where.tmp.rmdir()
    _write_meta(sif, key)


def _step(layer, forced, sif, owner, key) -> str:
    """What the build will do for a layer: "current", "fetch" (from the cache) or "build"."""
    if layer in forced:
        return "build"
    if is_current(sif, key):
        return "current"
    return "fetch" if cache.slot(owner, layer).joinpath(f"{key}.sif").is_file() else "build"


def _keep(owner, layer, key, sif, progress):
    """The layer into the user's cache; a cache that cannot take it fails no build."""
    try:
        cache.store(owner, layer, key, sif)
    except OSError as error:
        progress.step(f"the {layer} layer was not kept in the cache {cache.cache_dir()} "
                      f"({error.strerror}); the next build of it cannot take it from there")


def _write_meta(sif, key):
    stat = sif.stat()
    write_atomic(_meta_path(sif), json.dumps(
        {"key": key, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns},
        indent=1, sort_keys=True) + "\n")


def _provide_kept(host: Path, text: str, reuse: bool) -> list:
    """A folder under the host mount for each kept step the definition names, holding the
    stored output when there is one; returns the names of those left to fill."""
    to_fill = []
    for folder in dict.fromkeys(_KEPT_FOLDER.findall(text)):
        if not (reuse and cache.fetch_kept(folder, host / KEPT_DIR / folder)):
            (host / KEPT_DIR / folder).mkdir(parents=True)
            to_fill.append(folder)
    return to_fill


def _meta_path(sif):
    return sif.with_name(sif.name + ".json")


def _remove_stale_temps(images, where, name):
    # left behind only if the guard itself was killed; the lock says no build is running
    for stale in images.glob(f".{name}.*sif.tmp-*"):
        stale.unlink(missing_ok=True)
    for stale in where.tmp.glob(f"{WORK_PREFIX}{name}-*"):
        shutil.rmtree(stale, ignore_errors=True)


def _write_host_settings(host: Path, text: str, progress):
    """The CA bundle, pip indexes and local wheels of this host, for %post only; indexes that
    do not answer are left out, and named in HPCML_PIP_INDEXES_DOWN for the definition's own."""
    host.mkdir()
    pip = hostinfo.pip_settings()
    down = _indexes_down([pip["index_url"], *pip["extra_index_urls"], *indexes.named_in(text)],
                         pip["cert"], progress)
    lines = []
    if pip["cert"]:
        shutil.copyfile(pip["cert"], host / "ca.crt")
        bundle = f"{HOST_MOUNT}/ca.crt"
        lines += [f"export {var}={bundle}" for var in
                  ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")]
    if pip["index_url"]:
        lines.append(f"export PIP_INDEX_URL='{pip['index_url']}'")
    extra = [url for url in pip["extra_index_urls"] if url not in down]
    if extra:
        lines.append(f"export PIP_EXTRA_INDEX_URL='{' '.join(extra)}'")
    if down:
        lines.append(f"export {DOWN_VARIABLE}='{' '.join(down)}'")
    if pip["find_links"]:
        wheels = host / "wheels"
        wheels.mkdir()
        for directory in pip["find_links"]:
            for wheel in Path(directory).glob("*.whl"):
                link_or_copy(wheel, wheels / wheel.name)
        lines.append(f"export PIP_FIND_LINKS={HOST_MOUNT}/wheels")
    (host / Path(SETTINGS).name).write_text("\n".join(lines) + "\n")


def _indexes_down(urls, cafile, progress) -> list:
    down = []
    for url in dict.fromkeys(u for u in urls if u):
        reason = indexes.why_down(url, cafile)
        if reason is None:
            continue
        down.append(url)
        progress.once(f"pip index {url} does not answer ({reason}); this build leaves it out")
    return down


STEP_MARKERS = ("--- devel: ", "--- base: ", "--- build: ", "--- final: ", "--- test: ",
                "INFO:    Creating SIF", "INFO:    Running testscript", "INFO:    Starting build")


def _progress_lines(progress):
    def on_line(line):
        text = line.strip()
        if text.startswith(STEP_MARKERS):
            progress.step(text.replace("INFO:    ", "").rstrip("."))
    return on_line


@functools.cache
def _takes_squashfs_args(runtime) -> bool:
    """Apptainer 1.1+ and SingularityCE 3.9+ pass --mksquashfs-args on; older ones refuse it."""
    result = runner.run([runtime, "build", "--help"], check=False, timeout=60)
    return "--mksquashfs-args" in result.stdout
