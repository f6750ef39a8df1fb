"""The site-image route: a target whose one layer starts from the site's own image file.

The plan and the key without an image; a missing file as one line; and a real build on a
stand-in base: the cpu target's devel layer, plain Debian with a CPU torch in /opt/venv and a
compiler, which is the layout the route relies on (LUMI AI Factory's image keeps its torch in
/opt/venv too). What only LUMI can prove (its ROCm torch, RCCL, the bindings module) stays
unproven here; docs/lumi.md says so."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import RECIPES, run_builder
from helpers.standin import stand_in_recipes

from builder.layerbuild import store
from builder.recipes.tree import RecipeTree
from builder.render.layer_sharing import plan_layers

LABEL = "org.hpc-ml-containers.version.torch"


def test_lumi_laif_is_one_layer_on_lumis_image():
    tree = RecipeTree(RECIPES)
    image = tree.target("lumi-laif").site_image
    plans = plan_layers(tree, "lumi-laif")
    assert list(plans) == ["image"]
    plan = plans["image"]
    assert (plan.site_image, plan.parents, plan.base_images) == (image.path, (), ())
    assert plan.text.count(f"Bootstrap: localimage\nFrom: {image.path}\n") == 2
    assert image.path == tree.site("lumi").site_image.path


def test_the_layer_key_follows_the_site_image_file(tmp_path):
    base = tmp_path / "site.sif"
    base.write_bytes(b"one")
    plans = plan_layers(RecipeTree(stand_in_recipes(tmp_path, base)), "standin-image")
    first = store.layer_keys(plans, {})["image"]
    assert store.layer_keys(plans, {})["image"] == first
    base.write_bytes(b"two!")  # a new image at the same path
    assert store.layer_keys(plans, {})["image"] != first


def test_a_missing_site_image_is_one_line_and_nothing_is_written(tmp_path):
    missing = tmp_path / "not-here.sif"
    recipes = stand_in_recipes(tmp_path, missing)
    line = next(
        number
        for number, text in enumerate((recipes / "sites/standin.yaml").read_text().splitlines(), 1)
        if text.startswith("  path:")
    )
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run_builder("build", "standin-image", "--recipes", recipes, "--images", tmp_path / "images")
    assert result.returncode == 2
    assert result.stderr == (
        f"error: {recipes}/sites/standin.yaml:{line}: site_image.path: {missing}: no such file here; "
        "expected the site's own image file (build on the site, or point site_image.path at a copy of it)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_job_scripts_of_a_site_image_target_load_the_sites_modules(tmp_path):
    recipes = stand_in_recipes(tmp_path, tmp_path / "site.sif")
    (tmp_path / "train.py").write_text("print('training')\n")  # the script names it by its path
    result = run_builder("jobscript", "standin-image", "--recipes", recipes, "--", "python", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    use, load = f"module use {tmp_path / 'modules'}", "module load standin-bindings"
    assert use in lines and load in lines
    assert lines.index(use) < lines.index(load) < next(i for i, x in enumerate(lines) if "singularity_wrapper" in x)


def labels(apptainer, image) -> dict:
    result = subprocess.run(
        [apptainer, "inspect", "--json", "--labels", str(image)], capture_output=True, text=True, timeout=120
    )
    return json.loads(result.stdout)["data"]["attributes"]["labels"]


def stand_in_base(cpu_image) -> Path:
    """The cpu devel layer (a hard link, not a copy) at a path that stays from run to run, in
    the user's cache: the stand-in's layer key names its base's path, size and time, so a run
    takes the layer from the layer cache unless what renders or builds it changed (a base under
    the test's tmp folder made every run compile DeepSpeed's ops again, 8 to 12 minutes)."""
    from builder.host.cache import cache_dir

    folder = cache_dir() / "test-standin"
    folder.mkdir(parents=True, exist_ok=True)
    base, new = folder / "standin.sif", folder / f".standin.sif.{os.getpid()}"
    os.link(cpu_image.parent / "cpu.devel.sif", new)
    os.replace(new, base)  # a no-op when base is that file already: then the new name stays
    new.unlink(missing_ok=True)
    return base


# make test-full: the stand-in's op compile is 14 min on a new machine (12 s from the cache)
@pytest.mark.full
@pytest.mark.image
def test_the_route_builds_on_a_stand_in_base_and_reads_what_it_holds(cpu_image, apptainer, tmp_path):
    base = stand_in_base(cpu_image)
    recipes = stand_in_recipes(tmp_path, base)
    images = tmp_path / "images"
    result = run_builder("build", "standin-image", "--recipes", recipes, "--images", images, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    # one layer: its %test ran the ops, the runtime, the frameworks and the pins
    assert sorted(p.name for p in images.glob("*.sif")) == ["standin-image.sif"]
    assert "its %test passed" in result.stderr
    log = images / "standin-image.image.build.log"
    if not log.exists():  # built and tested by an earlier run with the same key
        assert "image layer" in result.stderr and "taken from the cache" in result.stderr, result.stderr
    else:
        assert "frameworks the image lacks: lightning==" in log.read_text()
        for block in ("site_image", "deepspeed", "frameworks", "runtime"):
            assert f"--- test: {block}" in log.read_text()
    found, cpu = (labels(apptainer, path) for path in (images / "standin-image.sif", cpu_image))
    # the base's torch, read at build time: the cpu image pins the same one
    assert found[LABEL].split("+")[0] == cpu[LABEL]
    assert found["org.hpc-ml-containers.image.final"] == f"localimage:{base}"
    again = run_builder("build", "standin-image", "--recipes", recipes, "--images", images)
    assert again.returncode == 0 and again.stdout.strip().endswith("is up to date"), again.stderr
