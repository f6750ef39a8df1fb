"""driver_fit: a site's recorded GPU driver against each target's CUDA or ROCm release, as
`check` warns and `publish` refuses. LUMI's amdgpu 6.3.60300 runs ROCm 6.1 to 7.0 (its user
update of January 2026); a stand-in NVIDIA site shows the CUDA side."""

import shutil

import pytest
from conftest import ROOT
from helpers.cli_here import run_here

from builder.recipes import driver_fit
from builder.recipes.tree import RecipeTree


def test_lumis_driver_runs_rocm_7_0_and_not_laifs_rocm_7_2(tree):
    lumi = tree.sites["lumi"]
    assert (lumi.gpu.driver.version, lumi.gpu.driver.rocm) == ("6.3.60300", ("6.1", "7.0"))
    runtimes = {name: tree.targets[name].torch.runtime for name in ("lumi-rocm", "lumi-rocm64", "lumi-laif")}
    assert runtimes == {"lumi-rocm": "7.0", "lumi-rocm64": "6.4", "lumi-laif": "7.0"}
    assert all(driver_fit.misfit(tree.targets[name], lumi) == "" for name in runtimes)
    why = driver_fit.misfit(tree.targets["lumi-laif72"], lumi)
    assert why.startswith("lumi-laif72's ROCm 7.2 is outside what lumi's GPU driver runs: ")
    assert "amdgpu 6.3.60300 runs ROCm 6.1 to 7.0 (https://lumi-supercomputer.github.io/" in why
    assert why.endswith("read 2026-12-02)")
    assert driver_fit.fitting(tree, lumi) == ["lumi-laif", "lumi-rocm", "lumi-rocm64"]


def test_the_default_laif_image_is_the_rocm_7_0_one_and_7_2_a_named_choice(tree):
    default, chosen = tree.targets["lumi-laif"].site_image, tree.targets["lumi-laif72"].site_image
    assert "u24r70" in default.path and default.runtime == "7.0"
    assert "u24r72" in chosen.path and chosen.runtime == "7.2"
    assert (chosen.venv, chosen.module_load) == (default.venv, default.module_load)
    assert chosen.origin[0].endswith("lumi.yaml") and chosen.origin[1] > default.origin[1]


def test_sites_that_record_no_driver_and_cpu_targets_are_not_judged(tree):
    for name, target in tree.targets.items():
        for site in target.sites:
            if site.gpu.driver is None or target.torch.flavour == "cpu":
                assert driver_fit.misfit(target, site) == "", (name, site.name)


def _tree_with(tmp_path, site, old, new) -> RecipeTree:
    recipes = shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    path = recipes / "sites" / f"{site}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return RecipeTree(recipes)


NVIDIA_DRIVER = """  per_node: 4
  driver: {version: 570.124.06, source: a stand-in page, read: "2026-12-02"}
"""


def test_an_nvidia_driver_older_than_the_cuda_major_needs_is_named(tmp_path):
    tree = _tree_with(tmp_path, "jean-zay-v100", "  per_node: 4\n", NVIDIA_DRIVER)
    site = tree.sites["jean-zay-v100"]
    assert driver_fit.misfit(tree.targets["v100-cuda"], site) == ""  # CUDA 12.8: 525.60.13 or newer
    assert driver_fit.misfit(tree.targets["csc-cuda"], site) == ""
    tree = _tree_with(tmp_path / "b", "karolina", "  per_node: 8\n", NVIDIA_DRIVER.replace("4", "8", 1))
    assert driver_fit.misfit(tree.targets["a100-cuda"], tree.sites["karolina"]) == (
        "a100-cuda's CUDA 13.2 needs an NVIDIA driver of 580.65.06 or newer; karolina runs 570.124.06 "
        "(a stand-in page, read 2026-12-02)"
    )


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('    rocm: ["6.1", "7.0"]\n', "", "gpu.driver: driver: expected rocm: [oldest, newest] for an amdgpu driver"),
        ('rocm: ["6.1", "7.0"]', "rocm: [6.1, 7.0]", "gpu.driver.rocm.0: expected a release such as 7.0 (quoted"),
        ('read: "2026-12-02"', "read: 2026-12-02", "gpu.driver.read: expected the date the source was read"),
    ],
)
def test_a_driver_written_wrong_is_one_line_at_its_place(tmp_path, old, new, message):
    recipes = shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    site = recipes / "sites" / "lumi.yaml"
    site.write_text(site.read_text().replace(old, new, 1))
    result = run_here("--recipes", recipes, "show", "lumi-rocm")
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_check_warns_of_the_named_choice_and_still_passes(tmp_path):
    result = run_here("check")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "lumi-laif72's ROCm 7.2 is outside" in warnings[0]
    assert "use lumi-laif or lumi-rocm or lumi-rocm64" in warnings[0]


def test_publish_refuses_an_image_the_sites_driver_cannot_run_before_anything_is_made(tmp_path):
    images, prefix = tmp_path / "images", tmp_path / "modules"
    images.mkdir()
    prefix.mkdir()
    (images / "lumi-laif72.sif").write_bytes(b"not looked at: the driver is judged first")
    result = run_here("publish", "lumi-laif72", "--prefix", prefix, "--images", images, "--skip-smoke")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "ROCm 7.2 is outside what lumi's GPU driver runs" in result.stderr
    assert "use lumi-laif or lumi-rocm or lumi-rocm64, or, if the driver has moved, record it" in result.stderr
    assert list(prefix.iterdir()) == []
