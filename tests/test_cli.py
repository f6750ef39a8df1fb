"""The read-only commands: list and show."""

import yaml

from conftest import run_builder


def test_list_names_every_target_alias_and_site_with_torch_and_arch(tmp_path):
    result = run_builder("list", "--images", tmp_path)      # nothing built there
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for target, torch, arch in [("lumi-rocm", "torch 2.9.1 rocm", "gfx90a"),
                                ("v100-cuda", "torch 2.10.0 cuda", "sm_70"),
                                ("a100-cuda", "torch 2.13.0 cuda", "sm_80"),
                                ("h100-cuda", "torch 2.13.0 cuda", "sm_90"),
                                ("cpu", "torch 2.13.0 cpu", "-")]:
        assert any(line.split()[0] == target and torch in line and f"arch {arch} " in line
                   for line in lines), target
    assert "  puhti-cuda    alias of v100-cuda" in lines and "  mahti-cuda    alias of a100-cuda" in lines
    for site in ("lumi", "puhti", "mahti", "jean-zay", "jean-zay-v100", "jean-zay-h100", "karolina", "local"):
        assert any(line.split()[0] == site for line in lines), site
    assert "built:" not in result.stdout


def test_an_alias_means_its_target_and_says_so():
    result = run_builder("show", "puhti-cuda")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["target"] == "v100-cuda"
    assert result.stderr == "note: puhti-cuda is an alias of v100-cuda; using v100-cuda\n"


def test_show_prints_the_resolved_recipe_as_yaml():
    result = run_builder("show", "lumi-rocm")
    assert result.returncode == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    assert shown["gpu_archs"] == ["gfx90a"]
    assert shown["torch"] == {"flavour": "rocm", "version": "2.9.1",
                              "index": "https://download.pytorch.org/whl/rocm6.4"}
    assert shown["comm"]["plugin"]["version"] == "1.18.0"
    assert "/pfs" in shown["site_facts"]["lumi"]["binds"]
    assert shown["environment"]["NCCL_SOCKET_IFNAME"] == "hsn0,hsn1,hsn2,hsn3"


def test_show_of_a_two_site_image_lists_both_sites_and_both_archs():
    result = run_builder("show", "csc-cuda")
    shown = yaml.safe_load(result.stdout)
    assert shown["sites"] == ["jean-zay-v100", "jean-zay", "puhti", "mahti"]
    assert shown["gpu_archs"] == ["sm_70", "sm_80"]
    assert shown["cuda_toolkit"] == {"from": "debian", "version": None, "gcc": "13"}


def test_usage_mistakes_are_one_line_errors_with_exit_2():
    for args in ([], ["bogus"], ["render", "--bogus"], ["show"]):
        result = run_builder(*args)
        assert result.returncode == 2, args
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: "), args


def test_help_still_works():
    result = run_builder("render", "--help")
    assert result.returncode == 0 and "--all" in result.stdout
