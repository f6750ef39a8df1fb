"""The read-only commands: list and show."""

import yaml

from conftest import run_builder


def test_list_names_every_target_and_site_with_arch_and_base():
    result = run_builder("list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for target, arch, base in [("lumi-rocm", "gfx90a", "docker:rocm/dev-ubuntu-24.04"),
                               ("puhti-cuda", "sm_70", "docker:ubuntu:24.04"),
                               ("cpu", "-", "debootstrap:bookworm")]:
        assert any(line.split()[0] == target and arch in line and base in line for line in lines), target
    for site in ("lumi", "puhti", "mahti", "jean-zay", "karolina", "local"):
        assert any(line.split()[0] == site for line in lines), site


def test_show_prints_the_resolved_recipe_as_yaml():
    result = run_builder("show", "lumi-rocm")
    assert result.returncode == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    assert shown["gpu_archs"] == ["gfx90a"]
    assert shown["torch"] == {"flavour": "rocm", "version": "2.13.0",
                              "index": "https://download.pytorch.org/whl/rocm6.4"}
    assert shown["comm"]["plugin"]["version"] == "1.18.0"
    assert "/pfs" in shown["site_facts"]["lumi"]["binds"]
    assert shown["environment"]["NCCL_SOCKET_IFNAME"] == "hsn0,hsn1,hsn2,hsn3"


def test_show_of_a_two_site_image_lists_both_sites_and_both_archs():
    result = run_builder("show", "csc-cuda")
    shown = yaml.safe_load(result.stdout)
    assert shown["sites"] == ["puhti", "mahti"] and shown["gpu_archs"] == ["sm_70", "sm_80"]


def test_usage_mistakes_are_one_line_errors_with_exit_2():
    for args in ([], ["bogus"], ["render", "--bogus"], ["show"]):
        result = run_builder(*args)
        assert result.returncode == 2, args
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: "), args


def test_help_still_works():
    result = run_builder("render", "--help")
    assert result.returncode == 0 and "--all" in result.stdout
