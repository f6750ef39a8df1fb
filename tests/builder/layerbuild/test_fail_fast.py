"""A build that cannot get the torch its recipe asks for stops before it writes or pulls
anything: here, as a user runs it, with the recipe's PyTorch index at a port of this machine
where nothing listens."""

import shutil

from conftest import RECIPES, run_builder

from builder.recipes.tree import RecipeTree


def test_build_stops_in_one_line_when_the_torch_index_does_not_answer(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    versions = recipes / "versions.yaml"
    text = versions.read_text()
    assert "https://download.pytorch.org/whl/rocm7.0" in text
    versions.write_text(text.replace("https://download.pytorch.org/whl/rocm7.0", "https://127.0.0.1:9/whl/rocm7.0"))
    images = tmp_path / "images"
    before = sorted(p.name for p in tmp_path.iterdir())
    # the timeout is the bound: stopping later means it went on to pull the base image
    result = run_builder("build", "lumi-rocm", "--recipes", recipes, "--images", images, timeout=120)
    lines = result.stderr.splitlines()
    assert result.returncode == 1, result.stderr
    assert lines[-1].startswith("error: https://127.0.0.1:9/whl/rocm7.0 does not answer ("), result.stderr
    assert f"holds torch-{RecipeTree(RECIPES).target('lumi-rocm').torch.version}+rocm7.0;" in lines[-1]
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no images folder, no layer, no temp file


def test_build_stops_in_one_line_when_the_base_images_registry_does_not_answer(tmp_path):
    """The torch wheel is in a local folder (pip's find-links), so the torch check passes
    whether or not this machine reaches PyTorch's index; the registry at 127.0.0.1:9 does not."""
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    versions = recipes / "versions.yaml"
    text = versions.read_text()
    for old in ("rocm/dev-ubuntu-24.04:7.0.2", "https://github.com/aws/aws-ofi-nccl.git"):
        assert old in text
    text = text.replace("rocm/dev-ubuntu-24.04:7.0.2", "127.0.0.1:9/rocm/dev-ubuntu-24.04:7.0.2")
    versions.write_text(
        text.replace("https://github.com/aws/aws-ofi-nccl.git", "https://127.0.0.1:9/aws/aws-ofi-nccl.git")
    )
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    torch = RecipeTree(RECIPES).target("lumi-rocm").torch
    (wheels / f"torch-{torch.version}+rocm7.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_text("")
    images = tmp_path / "images"
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run_builder(
        "build", "lumi-rocm", "--recipes", recipes, "--images", images, env={"PIP_FIND_LINKS": str(wheels)}, timeout=120
    )
    lines = result.stderr.splitlines()
    assert result.returncode == 1, result.stderr
    assert lines[-1].startswith("error: 127.0.0.1:9 does not answer ("), result.stderr
    assert (
        "the devel layer of lumi-rocm starts from docker://127.0.0.1:9/rocm/dev-ubuntu-24.04:7.0.2-complete;"
        in lines[-1]
    )
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no images folder, no layer, no temp file
