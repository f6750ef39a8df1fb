"""Building blocks: each knows one step of the image and returns Parts, never Apptainer text.

The order here is the order of each stage's %post. The build-host settings come first, then
the os block, which installs the packages every other block asked for (so it is called last,
with their wishes).

Each module is named for the block its Parts carry (``Part.block``, the name in the rendered
banners `echo '--- devel: torch'` and in tests/golden/blocks/<target>/<block>.txt), but for
os_packages, whose block is `os` (its BLOCK: a module named os would shadow the standard
library's); block_name() gives either. Its
docstring says, as hpccm's building blocks do, what it emits, what it reads from the target
and its sites, with an example. A Part's stage is build or final; the base layers render
them as the devel and base images, the top layer as its build and final stages. Helpers that
emit no Part live beside this package (render/git_sources.py).
"""

from ...recipes.target_model import Target
from . import (
    build_host,
    cuda_toolkit,
    deepspeed,
    extras,
    frameworks,
    libfabric,
    mpi,
    nccl,
    os_packages,
    provenance,
    python,
    rccl_ofi,
    runtime,
    site_image,
    torch,
)

# The base layers (devel and base images) hold what changes rarely and builds slowly; the
# top layer holds what changes often, so changing it rebuilds neither the OS nor torch.
BASE_BLOCKS = (python, torch, cuda_toolkit, nccl, libfabric, rccl_ofi, mpi)
TOP_BLOCKS = (provenance, extras, deepspeed, frameworks, runtime)
# A site-image target has one layer on the site's image: what the base holds is read first.
SITE_IMAGE_BLOCKS = (site_image, *TOP_BLOCKS)


def block_name(module) -> str:
    """The name of the block a module emits: its BLOCK, else the module's own name."""
    return getattr(module, "BLOCK", module.__name__.rsplit(".", 1)[-1])


def parts_by_layer(target: Target) -> dict:
    """{"base": Parts of the devel and base layers, "top": Parts of the image layer}, each in
    %post order; the build-host settings open both, the os block comes right after them. A
    site-image target's base is the site's image: its "base" is empty."""
    if target.site_image:
        return {"base": [], "top": build_host.parts(target) + [p for b in SITE_IMAGE_BLOCKS for p in b.parts(target)]}
    base = [part for block in BASE_BLOCKS for part in block.parts(target)]
    top = [part for block in TOP_BLOCKS for part in block.parts(target)]
    asked = [part.block for part in top if part.packages]
    if asked:  # they would rebuild the OS layer; a top block installs its own (deepspeed does)
        raise ValueError(f"top-layer blocks may not ask the os block for packages: {asked}")
    wanted = {"build": set(target.os.packages.build), "final": set(target.os.packages.final)}
    for part in base:
        wanted[part.stage].update(part.packages)
    host = build_host.parts(target)
    return {"base": host + os_packages.parts(target, wanted) + base, "top": host + top}
