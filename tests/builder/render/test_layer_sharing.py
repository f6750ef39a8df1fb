"""Targets that build on another target's devel and base layers (render/layer_sharing.py):
h100-cuda on a100-cuda's, csc-cuda on v100-cuda's, and a child of the CPU target built for
real on the CPU image's layers."""

import json
import secrets
import shutil
import subprocess

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


def test_a_child_of_the_cpu_target_is_built_on_the_cpu_images_layers(apptainer, cpu_image, tmp_path):
    """For real: the child's build takes cpu's devel and base layers (from the images folder,
    or the cache) and builds only its image layer."""
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    # a description of its own each run, so that its image layer is never in the user's cache
    # from an earlier run (the kept DeepSpeed wheel still is: it builds in a few minutes)
    (recipes / "targets" / "cpu-child.yaml").write_text(
        f"description: the CPU image under another name, to prove layer sharing ({secrets.token_hex(4)})\n"
        "extends: cpu\n"
    )
    images = cpu_image.parent
    built = run_builder("build", "cpu-child", "--recipes", recipes, "--images", images, timeout=1800)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "cpu-child builds on the devel and base layers of cpu" in built.stderr, built.stderr
    assert "building the devel layer" not in built.stderr and "building the base layer" not in built.stderr
    assert "building the image layer" in built.stderr, built.stderr
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
