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


# The ops DeepSpeed cannot build for ROCm (as recipes/targets/lumi-rocm.yaml skips them)
_ROCM_SKIPPED_OPS = (
    "async_io",
    "dc",
    "fused_lamb",
    "inference_core_ops",
    "quantizer",
    "random_ltd",
    "stochastic_transformer",
    "transformer",
    "transformer_inference",
)


def rocm_changes() -> dict:
    """What turns the minimal target into a ROCm image for an AMD gfx90a site such as lumi, as
    recipes/targets/lumi-rocm.yaml: ROCm's Ubuntu stage images, torch from the rocm7.0 index,
    DeepSpeed for ROCm less the ops hipify breaks, RCCL with the aws-ofi-nccl plugin on the
    image's own CXI libfabric, and the site's MPI ABI (MPICH) from the distribution.

    Example: mini_target(tree, rocm_changes(), sites=("lumi",))."""
    return {
        "stages": {
            "build": {"bootstrap": "docker", "image": "rocm7-devel"},
            "final": {"bootstrap": "docker", "image": "rocm7-runtime"},
        },
        "os": {"family": "ubuntu"},
        "torch": {"flavour": "rocm", "version": "2.10.0", "index": "rocm7.0"},
        "deepspeed": {"accelerator": "cuda", "skip": dict.fromkeys(_ROCM_SKIPPED_OPS, "not prebuilt for ROCm")},
        "comm": {"library": "rccl", "plugin": "aws-ofi-nccl", "libfabric": "cxi"},
        "mpi": {"abi": "mpich"},
    }


def site_image_target(tree, changes=None, site="lumi", name="mini-site-image"):
    """A site-image target of a test's own (recipes/targets/lumi-laif.yaml): the minimal
    target less what the site's image holds (its stages, OS, venv and packages), on ROCm for
    lumi's gfx90a, with what the test changes merged over it. mini_target cannot take keys
    away, and a site-image recipe may not name these."""
    spec = {key: value for key, value in MINIMAL.items() if key not in ("stages", "os", "python")}
    spec = merged(
        spec,
        {
            "site_image": True,
            "torch": {"flavour": "rocm"},
            "deepspeed": {"accelerator": "cuda", "skip": dict.fromkeys(_ROCM_SKIPPED_OPS, "not prebuilt for ROCm")},
            "comm": {"library": "rccl"},
            "mpi": {"abi": "mpich", "mpi4py": False},
        },
    )
    spec = merged(spec, {**(changes or {}), "sites": [site]})
    return Target.from_yaml(name, Section(_Written(), spec), (tree.sites[site],), Versions(tree.versions), tree.ds_ops)
