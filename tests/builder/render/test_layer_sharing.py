"""Targets that build on another target's devel and base layers (render/layer_sharing.py):
h100-cuda on a100-cuda's, csc-cuda on v100-cuda's, and a child of the CPU target built for
real on the CPU image's layers."""

import json
import re
import shutil
import subprocess

import pytest
from conftest import CONTAINERS, RECIPES, run_builder

from builder.layerbuild.store import layer_keys
from builder.recipes.tree import RecipeTree
from builder.render.layer_sharing import layer_owner, plan_layers

MIRROR = {"MIRROR": "http://mirror.invalid/debian"}


def keys(tree, name):
    return layer_keys(plan_layers(tree, name), MIRROR)


def test_a_target_that_differs_only_in_its_archs_builds_on_its_parents_layers():
    tree = RecipeTree(RECIPES)
    assert {name: layer_owner(tree, name) for name in ("h100-cuda", "csc-cuda", "a100-cuda", "v100-cuda")} == {
        "h100-cuda": "a100-cuda",
        "csc-cuda": "v100-cuda",
        "a100-cuda": "a100-cuda",
        "v100-cuda": "v100-cuda",
    }
    h100, a100 = keys(tree, "h100-cuda"), keys(tree, "a100-cuda")
    assert (h100["devel"], h100["base"]) == (a100["devel"], a100["base"]) and h100["image"] != a100["image"]
    files = {layer: plan.file_name for layer, plan in plan_layers(tree, "csc-cuda").items()}
    assert files == {"devel": "v100-cuda.devel.def", "base": "v100-cuda.base.def", "image": "csc-cuda.def"}
    # the image layer compiles for its own archs, on the layers it shares
    image = plan_layers(tree, "h100-cuda")["image"].text
    assert "export TORCH_CUDA_ARCH_LIST=9.0" in image and "TORCH_CUDA_ARCH_LIST=8.0" not in image


def test_an_image_of_another_cpu_architecture_builds_its_own_layers_on_its_own_roots():
    """gh200-cuda is a100-cuda's recipe for aarch64: the same parts, but no layer of it serves."""
    tree = RecipeTree(RECIPES)
    assert layer_owner(tree, "gh200-cuda") == "gh200-cuda"
    plans = plan_layers(tree, "gh200-cuda")
    assert [plan.file_name for plan in plans.values()] == [
        "gh200-cuda.devel.def",
        "gh200-cuda.base.def",
        "gh200-cuda.def",
    ]
    root = 'debootstrap --arch=arm64 --variant=minbase --include=apt trixie "$APPTAINER_ROOTFS" {{ MIRROR }}\n'
    for layer in ("devel", "base"):
        text = plans[layer].text
        assert "Bootstrap: scratch\n" in text and root in text and "OSVersion" not in text
        assert "MIRROR" in plans[layer].build_args
    # the x86_64 targets keep Apptainer's own debootstrap bootstrap
    assert "Bootstrap: debootstrap\nOSVersion: trixie\n" in plan_layers(tree, "a100-cuda")["devel"].text
    assert "%setup" not in (CONTAINERS / "a100-cuda.devel.def").read_text()
    image = plans["image"].text
    assert "org.hpc-ml-containers.arch aarch64\n" in image and "CPU arch: aarch64; GPU arch: sm_90." in image


def test_only_the_layers_a_target_owns_are_committed():
    assert not list(CONTAINERS.glob("h100-cuda.*.def")) and not list(CONTAINERS.glob("csc-cuda.*.def"))
    assert (CONTAINERS / "h100-cuda.def").is_file() and (CONTAINERS / "a100-cuda.base.def").is_file()


def test_a_child_that_changes_a_lower_layer_builds_its_own(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    child = recipes / "targets" / "h100-cuda.yaml"
    child.write_text(
        child.read_text() + "os:\n  packages:\n    final: [hostname, libibverbs1, ibverbs-providers, "
        "librdmacm1t64, rdma-core]\n"
    )
    tree = RecipeTree(recipes)
    assert layer_owner(tree, "h100-cuda") == "h100-cuda"
    files = [plan.file_name for plan in plan_layers(tree, "h100-cuda").values()]
    assert files == ["h100-cuda.devel.def", "h100-cuda.base.def", "h100-cuda.def"]
    assert keys(tree, "h100-cuda")["base"] != keys(tree, "a100-cuda")["base"]


# make test-full: on a machine with empty caches its image layer is 4.6 min of CI's 60
# (docs/performance.md). make test keeps the choice of layers (layerbuild/test_layers.py, with
# the fake runner); the heavy CUDA runs build h100-cuda and csc-cuda on their parents' layers.
@pytest.mark.full
def test_a_child_of_the_cpu_target_is_built_on_the_cpu_images_layers(apptainer, cpu_image, tmp_path):
    """For real: the child's build takes cpu's devel and base layers (from the images folder,
    or the cache) and builds only its image layer."""
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    # Its image layer is built once per change of the CPU image's (its key covers its parents'),
    # then comes from the user's cache like any layer: either way it starts from cpu's layers.
    (recipes / "targets" / "cpu-child.yaml").write_text(
        "description: the CPU image under another name, to prove layer sharing\nextends: cpu\n"
    )
    # its lock, as `hpcml lock cpu-child` writes it: the same steps, the base ones cpu's own
    shutil.copytree(recipes / "locks" / "cpu", recipes / "locks" / "cpu-child")
    images = cpu_image.parent
    built = run_builder("build", "cpu-child", "--recipes", recipes, "--images", images, timeout=1800)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "cpu-child builds on the devel and base layers of cpu" in built.stderr, built.stderr
    assert "building the devel layer" not in built.stderr and "building the base layer" not in built.stderr
    assert re.search(r"building the image layer|image layer \S+ taken from the cache", built.stderr), built.stderr
    assert (images / "cpu-child.sif").is_file() and not list(images.glob("cpu-child.*.sif"))
    again = run_builder("build", "cpu-child", "--recipes", recipes, "--images", images)
    assert "is up to date" in again.stdout, again.stdout + again.stderr
    shown = subprocess.run(
        [apptainer, "inspect", "--labels", "--json", images / "cpu-child.sif"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    labels = json.loads(shown.stdout)["data"]["attributes"]["labels"]
    assert labels["org.hpc-ml-containers.target"] == "cpu-child"
    assert labels["org.label-schema.usage.singularity.deffile.from"] == "cpu.base.sif"
