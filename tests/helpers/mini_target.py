"""A target of a test's own, for testing one block alone (hpccm tests each building block with
its own parameters): the least a recipe can say, a CPU image for the local site, with what the
test changes merged over it. Built by Target.from_yaml with the repository's versions.yaml and
DeepSpeed op list, as the recipe tree builds its targets, so a block's test does not depend
on which targets recipes/ holds.

Example: mini_target(tree, cuda_changes(), sites=("mahti",)), an A100 site's CUDA image.
"""

import copy

from builder.errors import RecipeError
from builder.recipes.section import Section
from builder.recipes.target_model import Target
from builder.recipes.target_parts import Versions

MINIMAL = {
    "description": "a target of a test's own",
    "sites": ["local"],
    "stages": {
        "build": {"bootstrap": "debootstrap", "image": "debian-bookworm"},
        "final": {"bootstrap": "debootstrap", "image": "debian-bookworm"},
    },
    "os": {"family": "debian", "packages": {"build": [], "final": []}},
    "python": {"venv": "/opt/venv", "packages": []},
    "torch": {"flavour": "cpu"},
    "deepspeed": {"accelerator": "cpu"},
    "comm": {"library": "gloo"},
    "mpi": {"abi": "openmpi", "mpi4py": False},
}


class _Written:
    """Where the spec came from, for the errors a Section raises: the test's own dict."""

    def error(self, where, message):
        return RecipeError(f"{'.'.join(map(str, where))}: {message}", file="mini target")


def merged(base: dict, changes: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def mini_target(tree, changes=None, sites=("local",), name="mini"):
    spec = merged(MINIMAL, {**(changes or {}), "sites": list(sites)})
    linked = tuple(tree.sites[site] for site in sites)
    return Target.from_yaml(name, Section(_Written(), spec), linked, Versions(tree.versions), tree.ds_ops)


def cuda_changes() -> dict:
    """What turns the minimal target into a CUDA image for an A100 site: torch and DeepSpeed
    for CUDA, NCCL, nvcc from PyPI, and the ops DeepSpeed cannot prebuild there left out."""
    skip = {
        op: "not prebuilt in a test's target"
        for op in ("evoformer_attn", "gds", "fp_quantizer", "cutlass_ops", "ragged_device_ops", "dc")
    }
    return {
        "torch": {"flavour": "cuda"},
        "cuda_toolkit": {"from": "pypi", "version": "13.0.3"},
        "comm": {"library": "nccl"},
        "deepspeed": {"accelerator": "cuda", "skip": skip},
    }
