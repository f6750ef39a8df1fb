"""`hpcml rebuild NAME/VERSION --prefix P`: the way back from a published version to its image.
The version's target is built again, every layer, from the source bundle it was published
with (kept_bundle.py) and with no network, into a fresh images folder, and the rebuild's files
are compared with the published image's (rebuild_check.py).

The bundle: the version's own bundle/ where it keeps it whole, else the --bundle DIR whose
SHA256SUMS is, byte for byte, the bundle.SHA256SUMS kept beside the image. The build itself is
the one `hpcml build TARGET --bundle DIR` runs (layerbuild.layers.build); a stage imports no
other stage, so the command line hands it in.

Example:
    bundle_for_rebuild(Path("/appl/ml/pytorch/2.13.0-cpu"), None)   # .../2.13.0-cpu/bundle, kept whole
    bundle_for_rebuild(root, "bundles/cpu")   # bundles/cpu, when its SHA256SUMS is the kept one
    rebuild(tree, "/appl/ml", "pytorch/2.13.0-cpu", bundle=None, images=None, build=build)
"""

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from ..bundle import manifest
from ..errors import RecipeError
from ..host.which_apptainer import ready_apptainer
from ..invocation import program
from ..published import IMAGE, MANIFEST
from . import rebuild_check
from .kept_bundle import KEPT, KEPT_SUMS
from .verify import locate

IMAGES = Path("images")  # the builder's images folder, where a rebuild's own goes by default


def bundle_for_rebuild(root: Path, given) -> Path:
    """The bundle to rebuild the version at ``root`` from: the one it keeps whole, else
    ``given`` when its SHA256SUMS is the kept manifest byte for byte; one line (exit 2) when
    neither is there or ``given`` is another bundle."""
    spec = f"{root.parent.name}/{root.name}"
    if (root / KEPT / manifest.NAME).is_file():
        if given:
            print(f"note: {spec} keeps its bundle whole; rebuilding from {root / KEPT}, not from {given}")
        return root / KEPT
    if not (root / KEPT_SUMS).is_file():
        raise RecipeError(
            f"{spec} was published without its source bundle (no {KEPT_SUMS}); build it from one with "
            f"`{program()} build TARGET --bundle DIR` and compare: "
            f"{program()} verify {spec} --prefix {root.parent.parent} --rebuild IMAGE",
            file=str(root),
        )
    ours = (root / KEPT_SUMS).read_bytes()
    if not given:
        raise RecipeError(
            f"{spec} keeps only its bundle's manifest ({KEPT_SUMS}, sha256 {_sha256(ours)}); "
            "name the bundle with --bundle DIR",
            file="command line",
        )
    try:
        theirs = (Path(given) / manifest.NAME).read_bytes()
    except OSError as error:
        raise RecipeError(
            f"--bundle {given}: no readable {manifest.NAME} there ({error.strerror}); expected the bundle "
            f"{spec} was published with ({KEPT_SUMS} sha256 {_sha256(ours)})",
            file="command line",
        ) from None
    if theirs != ours:
        raise RecipeError(
            f"--bundle {given}: its {manifest.NAME} (sha256 {_sha256(theirs)}) is not the one {spec} was "
            f"published with ({root / KEPT_SUMS}, sha256 {_sha256(ours)}); name that bundle",
            file="command line",
        )
    return Path(given)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def rebuild(tree, prefix, spec, *, bundle, images, build) -> Path:
    """Build the published version ``spec`` again and compare it with the published image.
    ``bundle``: --bundle DIR or None; ``images``: --images DIR (kept) or None (a fresh folder
    under images/, removed at the end); ``build(tree, target, images=, bundle=)``: the layer
    build, returning the image it made. Returns the version's folder."""
    name, version, root = locate(prefix, spec)
    target = _published_target(root, spec)
    tree.target(target)  # a target this checkout no longer has: its line, before anything is made
    folder = bundle_for_rebuild(root, bundle)
    if images:
        out = Path(images)
    else:
        IMAGES.mkdir(exist_ok=True)
        out = Path(tempfile.mkdtemp(prefix=f".rebuild-{name}-{version}-", dir=IMAGES))
    print(f"rebuilding {spec} ({target}) from the bundle {folder} into {out}", flush=True)
    built = False
    try:
        rebuilt = build(tree, target, images=out, bundle=folder)
        built = True
        rebuild_check.check(ready_apptainer(None), root / IMAGE, rebuilt)
    finally:
        if not images:
            _remove(out, keep_logs=not built)
    return root


def _published_target(root: Path, spec) -> str:
    try:
        target = json.loads((root / MANIFEST).read_text()).get("target")
    except (OSError, ValueError, AttributeError):
        target = None
    if not isinstance(target, str) or not target:
        raise RecipeError(f"{spec}: its {MANIFEST} names no target; run: {program()} verify {spec}", file=str(root))
    return target


def _remove(folder: Path, keep_logs: bool):
    """The rebuild's own images folder; after a failed build, all but its build logs."""
    if not keep_logs:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for path in folder.iterdir() if folder.is_dir() else ():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif not path.name.endswith(".log"):
            path.unlink(missing_ok=True)
    print(f"note: the rebuild's build logs are kept in {folder}; remove it once read")
