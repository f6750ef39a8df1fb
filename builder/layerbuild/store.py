"""Which layers a build can skip: keys, kept step outputs, and the user's layer cache
(host.cache) they come from and go back to.

A layer's key is a hash of its definition, its build arguments and the keys of the layers it
starts from; the sidecar file `<image>.sif.json` (host/sidecar.py) records it with the image's size and mtime,
so an unchanged target answers "up to date" without starting Apptainer, and the user's layer
cache supplies a layer built before under the same key.
"""

import contextlib
import hashlib
import json
from pathlib import Path

from .. import __version__
from ..host import cache, sidecar
from ..render import runtime_wheel
from ..render.parts import KEPT_DIR
from ..render.plan import PARENT_ARGS, in_order
from . import packing

# Layers that never leave this machine: the next layer unpacks them again, so compressing
# them is time spent twice for nothing. Same content either way, so not part of the key.
INTERMEDIATE = ("devel", "base")
# paths that differ between machines; what they hold is in the key already (parent keys, the
# runtime wheel's sha256 in the definition)
PATH_ARGS = frozenset(PARENT_ARGS) | {runtime_wheel.BUILD_ARG}


def build_key(text, args, parent_keys=(), shipped=False, left_out=(), site_image=None):
    """What a layer is made of: its definition, its build arguments (less the paths of the
    layers it starts from) and the keys of those layers. A shipped layer's key also says that
    its parent is named by file name in its labels (images built before named it by absolute
    path, a fact of the build machine, and must not be taken from the cache). ``left_out``:
    the layer's own pip indexes that did not answer, so pip took its packages from elsewhere;
    the same layer built once they answer is another layer. ``site_image``: what the site's
    image it starts from is (site_image_facts), so a new image at the same path rebuilds it."""
    material = {
        "builder": __version__,
        "packing": packing.VERSION,
        "definition": text,
        "parents": list(parent_keys),
        "build_args": {k: v for k, v in args.items() if k not in PATH_ARGS},
    }
    if shipped:
        material["from_label"] = "file name"
    if left_out:  # only then: a layer built with every index keeps the key it had
        material["indexes_left_out"] = sorted(left_out)
    if site_image:
        material["site_image"] = site_image
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def layer_keys(plans: dict, host_args: dict, indexes_down=()) -> dict:
    """{layer: key} for {layer: LayerPlan}; host_args: the values of the build arguments this
    host supplies (the Debian mirror); indexes_down: the pip indexes that do not answer. A
    layer's key covers the keys of its parents, and the site's image it starts from."""
    keys = {}
    for layer in in_order(plans):
        plan = plans[layer]
        keys[layer] = build_key(
            plan.text,
            used_args(plan, host_args),
            [keys[p] for p in plan.parents],
            shipped=layer not in INTERMEDIATE,
            left_out=[url for url in plan.pip_indexes if url in indexes_down],
            site_image=site_image_facts(plan.site_image) if plan.site_image else None,
        )
    return keys


def site_image_facts(path) -> dict:
    """The site's image file as the key knows it: the file a link names, its size and time
    (reading a site's image of tens of GB whole for a checksum would cost every build
    minutes; the site puts a new image in a new file, or at least a new time)."""
    real = Path(path).resolve()
    stat = real.stat()
    return {"file": str(real), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def used_args(plan, args: dict) -> dict:
    """The build arguments of ``args`` that the layer uses; Apptainer refuses unused ones."""
    return {name: value for name, value in args.items() if name in plan.build_args}


def layer_paths(images: Path, plans: dict) -> dict:
    """{layer: image file}, each named for the target whose layer it is."""
    return {layer: images / plan.file_name.replace(".def", ".sif") for layer, plan in plans.items()}


def step(plan, forced, sif, key) -> str:
    """What the build will do for a layer: "current", "fetch" (from the cache) or "build"."""
    if plan.layer in forced:
        return "build"
    if sidecar.is_current(sif, key):
        return "current"
    return "fetch" if cache.slot(plan.owner, plan.layer).joinpath(f"{key}.sif").is_file() else "build"


def keep(plan, key, sif, progress):
    """The layer into the user's cache; a cache that cannot take it fails no build."""
    try:
        cache.store(plan.owner, plan.layer, key, sif)
    except OSError as error:
        progress.step(
            f"the {plan.layer} layer was not kept in the cache {cache.cache_dir()} "
            f"({error.strerror}); the next build of it cannot take it from there"
        )


def kept_name(folder: str, site_image=None) -> str:
    """A kept step's name in the user's cache. The definition's folder name carries the hash of
    the step's inputs, but names a site's image by its path only: on a site's image the name
    also covers that file as the layer key knows it (``site_image``: its site_image_facts; a new
    image at the same path holds another torch, and a wheel compiled against the old one must
    not be put back)."""
    if not site_image:
        return folder
    material = json.dumps([folder, site_image], sort_keys=True)
    return f"{folder.rsplit('-', 1)[0]}-{hashlib.sha256(material.encode()).hexdigest()[:16]}"


def provide_kept(host: Path, kept: tuple, reuse: bool, site_image=None) -> list:
    """A folder under the host mount for each kept step, holding the stored output when there
    is one; returns the names of those left to fill."""
    to_fill = []
    for folder in kept:
        if not (reuse and cache.fetch_kept(kept_name(folder, site_image), host / KEPT_DIR / folder)):
            (host / KEPT_DIR / folder).mkdir(parents=True)
            to_fill.append(folder)
    return to_fill


def store_kept(host: Path, folders: list, owner: str, site_image=None):
    """Each kept step's output the build left complete, into the user's cache: a step that
    finished is kept even when a later one (or %test) failed, so the next build repeats only
    what broke (cache.store_kept takes only outputs marked complete)."""
    for folder in folders:
        with contextlib.suppress(OSError):  # a cache that cannot grow hides no error
            cache.store_kept(kept_name(folder, site_image), host / KEPT_DIR / folder, owner=owner)
