"""`hpcml diff` on two real CPU images that differ in one pin: the CPU image, and one built
from a copy of the recipes with accelerate moved back a release, relocked (the frameworks
step only) and built (the top layer only; the lower layers and the DeepSpeed wheel come
from the cache). Marker full: about 6 minutes on 2 cores."""

import shutil

import pytest
from conftest import RECIPES, run_builder

pytestmark = pytest.mark.full

PIN, OLDER = "  accelerate: 1.16.0\n", "  accelerate: 1.15.0\n"


def test_two_real_images_one_pin_apart_differ_in_that_package(cpu_image, tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    versions = recipes / "versions.yaml"
    assert PIN in versions.read_text()
    versions.write_text(versions.read_text().replace(PIN, OLDER))
    locked = run_builder("lock", "cpu", "--recipes", recipes, timeout=900)
    assert locked.returncode == 0, locked.stderr[-2000:]
    images = tmp_path / "images"
    built = run_builder("build", "cpu", "--recipes", recipes, "--images", images, timeout=3600)
    assert built.returncode == 0, built.stderr[-3000:]
    shown = run_builder("diff", cpu_image, images / "cpu.sif")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    python = lines[lines.index("Python distributions") + 1 :]
    python = python[: next(i for i, line in enumerate(python) if not line.startswith("  "))]
    assert "  changed  accelerate 1.16.0 -> 1.15.0" in python, shown.stdout
    # what moved with it, if anything, is a dependency of the frameworks step, never torch or numpy
    assert not [line for line in python if " torch " in line or " numpy " in line], shown.stdout
    assert "Debian packages" not in lines and "DeepSpeed ops" not in lines, shown.stdout
    print(shown.stdout)
