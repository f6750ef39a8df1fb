"""What build, smoke, publish and doctor share about built images on this machine (the
Apptainer that runs them is which_apptainer.py's): which image and site a command means,
the checksum file beside the smoke report (the report's own name is in the contract) and
the image's own labels. A low-level module: it imports none of the commands that use it."""

import fcntl
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import runner
from ..errors import RecipeError, ToolError
from ..invocation import hint
from ..labels import LABEL_PREFIX, MEASURED, ImageLabels
from .which_apptainer import ready_apptainer

IMAGE_SUM = "image.sha256"  # sha256sum's format: `sha256sum IMAGE > DIR/image.sha256` by hand


@dataclass(frozen=True)
class Built:
    """A built image of a target, and the site a command runs or publishes it for."""

    target: object
    site: object
    path: Path


def built_image(tree, target_name, images: Path, site_name=None) -> Built:
    """The target's image under ``images`` and its site (default: the target's first); one
    clear line when the image is missing or the site is not one of the target's."""
    target = tree.target(target_name)  # an alias names its target's image
    path = images / f"{target.name}.sif"
    if not path.is_file():
        build = hint(f"make build TARGET={target.name}", f"build {target.name} --images {images}")
        raise RecipeError(f"no image; build it first with: {build}", file=str(path))
    sites = {site.name: site for site in target.sites}
    site_name = site_name or next(iter(sites))
    if site_name not in sites:
        raise RecipeError(
            f"site {site_name!r} is not one {target.name} is built for (expected one of: {', '.join(sites)})",
            file="command line",
        )
    return Built(target, sites[site_name], path)


def read_labels(apptainer, image) -> ImageLabels:
    """The image's own labels, as `apptainer inspect` shows them."""
    result = runner.run([apptainer, "inspect", "--json", "--labels", str(image)])
    return ImageLabels.from_inspect(result.stdout, image, apptainer)


def identity(target) -> dict:
    """What an image built as ``target`` says it is, in its labels' words: the provenance
    block writes target, arch and gpu.arch; the torch flavour is in the embedded recipe."""
    return {
        "target": target.name,
        "arch": target.arch,
        "gpu.arch": ",".join(target.archs) or "none",
        "torch": target.torch.flavour,
    }


def _identity_of(labels: ImageLabels) -> dict:
    short = labels.stripped
    return {
        "target": short.get("target"),
        "arch": short.get("arch"),
        "gpu.arch": short.get("gpu.arch"),
        "torch": labels.flavour or None,
    }


def _described(facts: dict) -> str:
    return f"{facts['target']} ({facts['arch']}, GPU {facts['gpu.arch']}, torch {facts['torch']})"


def checked_labels(apptainer, built: Built, foreign=False) -> dict:
    """The image's labels, the project's by their short names (`version.torch`), once they
    show it was built as the target the command names (an image copied or renamed as another
    target's would otherwise be tested, published, signed or exported under the wrong name);
    one line, exit 2, when they do not. With ``foreign``, an image this builder did not make
    (no target label) passes: a job may run any image."""
    labels = read_labels(apptainer, built.path)
    found, wanted = _identity_of(labels), identity(built.target)
    if found["target"] is None and foreign:
        return labels.stripped
    if found["target"] is None:
        raise RecipeError(
            f"not an image this builder made (no {LABEL_PREFIX}.target label); expected an image of {wanted['target']}",
            file=str(built.path),
        )
    if found != wanted:
        build = hint(
            f"make build TARGET={built.target.name}", f"build {built.target.name} --images {built.path.parent}"
        )
        raise RecipeError(
            f"the image was built as {_described(found)}, not as {_described(wanted)}; build {wanted['target']}'s "
            f"own with: {build}",
            file=str(built.path),
        )
    return labels.stripped


def built_facts(target, images: Path) -> dict:
    """What the target's built image says about itself ({} when it is not built): its path and
    the labels only a build could measure (NCCL, CUDA runtime, oldest driver), for list/show."""
    path = images / f"{target.name}.sif"
    if not path.is_file():
        return {}
    facts = {"image": str(path)}
    try:
        labels = read_labels(ready_apptainer(target.sites[0]), path).stripped
    except ToolError as error:
        return {**facts, "labels": f"not read ({error})"}
    facts.update((key, labels[key]) for key in MEASURED if key in labels)
    return facts


@contextmanager
def image_lock(images: Path, name, shared=False):
    """A build holds its target's lock alone; smoke and publish hold it shared while they
    read the image, so a build never replaces an image that one of them is reading. Whoever
    comes second stops at once with one line, saying who holds it (never waits hours)."""
    path = images / f".{name}.lock"
    try:
        handle = open(path, "a")
    except OSError:
        if not shared:
            raise
        if not path.exists():  # a read-only folder where no build ever ran: none to share
            yield
            return
        handle = open(path)  # a read-only folder: flock needs no write access
    with handle:
        try:
            fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            if shared:
                holder = "a build of it is running"
            else:  # readers share the lock; a second build holds it alone
                try:
                    fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    holder = "a smoke run or publish is reading it"
                except BlockingIOError:
                    holder = "another build of it is running"
            raise ToolError(f"{name}: {holder} (lock {path}); try again when it has finished") from None
        yield
