"""Building blocks: each knows one step of the image and returns Parts, never Apptainer text.

The order here is the order of each stage's %post. The build-host settings come first, then
the os block, which installs the packages every other block asked for (so it is called last,
with their wishes).
"""

from . import (build_host, comm, deepspeed, extras, launchenv, mpi, os_packages, provenance,
               python, smoke, torch)

# The base layers (devel and base images) hold what changes rarely and builds slowly; the
# top layer holds what changes often, so changing it rebuilds neither the OS nor torch.
BASE_BLOCKS = (python, torch, comm, mpi)
TOP_BLOCKS = (provenance, extras, launchenv, deepspeed, smoke)
BLOCKS = BASE_BLOCKS + TOP_BLOCKS
TOP_NAMES = frozenset(block.__name__.rsplit(".", 1)[1] for block in TOP_BLOCKS)


def parts_for(target):
    """Every Part of a target, os block first, then the blocks in order."""
    parts = [part for block in BLOCKS for part in block.parts(target)]
    wanted = {"build": set(target.packages_build), "final": set(target.packages_final)}
    for part in parts:
        wanted[part.stage].update(part.packages)
    return build_host.parts(target) + os_packages.parts(target, wanted) + parts
