"""The layer plan render hands the build: every fact it carries agrees with the definition
text, for every target and layer, so the build never needs to read the text back."""

import re
from pathlib import Path

import pytest
from conftest import ROOT, recipe_tree

from builder.render.layer_sharing import plan_layers

TREE = recipe_tree()
TARGETS = sorted(TREE.targets)
# how the text shows each fact (read here, in the test, to check the plan against it)
BUILD_ARG = re.compile(r"\{\{ ([A-Z_]+) \}\}")
KEPT = re.compile(r"^kept=/mnt/kept/(\S+)$", re.M)
PIP_INDEX = re.compile(r"--(?:extra-)?index-url[= ]+(https?://[^\s'\"]+)")
DOCKER_FROM = re.compile(r"^Bootstrap: docker\nFrom: (\S+)$", re.M)
# a source's own URL, then its submodules' (git_sources.checkout sets each one's URL)
GIT_FETCH = re.compile(r" (?:fetch -q --depth 1|config submodule\.\S+\.url) (https://\S+)")


@pytest.mark.parametrize("name", TARGETS)
def test_the_plan_names_what_the_text_uses(name):
    for layer, plan in plan_layers(TREE, name).items():
        assert plan.layer == layer
        assert plan.build_args == tuple(sorted(set(BUILD_ARG.findall(plan.text)))), (name, layer)
        assert plan.kept == tuple(dict.fromkeys(KEPT.findall(plan.text))), (name, layer)
        assert plan.pip_indexes == tuple(dict.fromkeys(PIP_INDEX.findall(plan.text))), (name, layer)
        assert plan.base_images == tuple(dict.fromkeys(DOCKER_FROM.findall(plan.text))), (name, layer)
        assert plan.git_sources == tuple(dict.fromkeys(GIT_FETCH.findall(plan.text))), (name, layer)
        assert {f"From: {{{{ {arg} }}}}" for arg in plan.parent_args()} <= set(plan.text.splitlines())


def test_the_layers_start_from_each_other_in_key_order():
    plans = plan_layers(TREE, "cpu")
    assert [plans[layer].parents for layer in ("devel", "base", "image")] == [(), ("devel",), ("devel", "base")]
    assert plans["devel"].build_args == ("MIRROR", "SECURITY_MIRROR")  # cpu bootstraps from Debian, its pockets too
    assert "RUNTIME_WHEEL" in plans["image"].build_args
    assert [k.rsplit("-", 1)[0] for k in plans["image"].kept] == ["deepspeed-wheel"]


def test_a_target_with_its_own_torch_index_names_it():
    plans = plan_layers(TREE, "lumi-rocm")
    assert plans["devel"].pip_indexes and all("rocm" in url for url in plans["devel"].pip_indexes)
    assert not plans["image"].pip_indexes


def test_a_plan_names_the_base_images_and_git_sources_its_layer_fetches():
    plans = plan_layers(TREE, "lumi-rocm")
    assert plans["devel"].base_images == ("rocm/dev-ubuntu-24.04:7.0.2-complete",)
    assert plans["base"].base_images == ("rocm/dev-ubuntu-24.04:7.0.2",)
    assert sorted(plans["devel"].git_sources) == [
        "https://github.com/HewlettPackard/shs-cassini-headers.git",
        "https://github.com/HewlettPackard/shs-cxi-driver.git",
        "https://github.com/HewlettPackard/shs-libcxi.git",
        "https://github.com/aws/aws-ofi-nccl.git",
        "https://github.com/ofiwg/libfabric.git",
        "https://github.com/pmodels/hwloc.git",
        "https://github.com/pmodels/json-c.git",
        "https://github.com/pmodels/mpich.git",
    ]
    assert not plans["base"].git_sources and not plans["image"].base_images + plans["image"].git_sources
    # cpu bootstraps from Debian and compiles nothing from git
    assert all(not plan.base_images and not plan.git_sources for plan in plan_layers(TREE, "cpu").values())


def test_the_build_reads_no_definition_text():
    """No regex in the layer build: what it needs comes from the plan."""
    for path in sorted((ROOT / "builder" / "layerbuild").glob("*.py")):
        assert not re.search(r"^import re$|^from re import", path.read_text(), re.M), path.name
    sharing = Path(ROOT / "builder" / "render" / "layer_sharing.py").read_text()
    assert not re.search(r"^import re$|^from re import", sharing, re.M)
