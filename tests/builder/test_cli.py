"""The command line: list and show, usage mistakes, help, hints and a newcomer's rough edges."""

import os
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import RECIPES, ROOT
from helpers.cli_here import run_here

from builder.cli.registry import COMMANDS


def test_list_names_every_target_alias_and_site_with_torch_and_arch(tmp_path):
    result = run_here("list", "--images", tmp_path)  # nothing built there
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for target, torch, arch in [
        ("lumi-rocm", "torch 2.10.0 rocm", "gfx90a"),
        ("lumi-rocm64", "torch 2.9.1  rocm", "gfx90a"),
        ("v100-cuda", "torch 2.10.0 cuda", "sm_70"),
        ("a100-cuda", "torch 2.15.0 cuda", "sm_80"),
        ("h100-cuda", "torch 2.15.0 cuda", "sm_90"),
        ("cpu", "torch 2.13.0 cpu", "-"),
    ]:
        assert any(line.split()[0] == target and torch in line and f"gpu {arch} " in line for line in lines), target
    assert "  puhti-cuda    alias of v100-cuda" in lines and "  mahti-cuda    alias of a100-cuda" in lines
    # issue 34: each image's CPU architecture, and which of its sites still run
    gh200 = next(line for line in lines if line.split()[:1] == ["gh200-cuda"])
    assert " aarch64 gpu sm_90 " in gh200 and gh200.endswith("sites roihu")
    csc = next(line for line in lines if line.split()[:1] == ["csc-cuda"])
    assert " x86_64  gpu " in csc and csc.endswith("sites jean-zay-v100,jean-zay,puhti(retired),mahti(retired)")
    roihu = next(line for line in lines if line.split()[:1] == ["roihu"])
    assert roihu.split()[1] == "aarch64"
    for site in ("lumi", "puhti", "mahti", "jean-zay", "jean-zay-v100", "jean-zay-h100", "karolina", "local"):
        assert any(line.split()[0] == site for line in lines), site
    assert "built:" not in result.stdout


def test_an_alias_means_its_target_and_says_so():
    result = run_here("show", "puhti-cuda")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["target"] == "v100-cuda"
    assert result.stderr == "note: puhti-cuda is an alias of v100-cuda; using v100-cuda\n"


def test_show_prints_the_resolved_recipe_as_yaml():
    result = run_here("show", "lumi-rocm")
    assert result.returncode == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    assert shown["gpu_archs"] == ["gfx90a"]
    assert shown["torch"] == {
        "flavour": "rocm",
        "version": "2.10.0",
        "index": "https://download.pytorch.org/whl/rocm7.0",
    }
    assert shown["comm"]["plugin"]["version"] == "1.21.1"
    assert "ROCm 7.0.2" in shown["description"] and "lumi-rocm64" in shown["description"]
    assert "/pfs" in shown["site_facts"]["lumi"]["binds"]
    assert shown["environment"]["NCCL_SOCKET_IFNAME"] == "hsn0,hsn1,hsn2,hsn3"


def test_show_of_the_rocm_6_4_stack_says_it_is_the_multi_node_choice():
    shown = yaml.safe_load(run_here("show", "lumi-rocm64").stdout)
    assert shown["torch"]["version"] == "2.9.1"
    assert shown["torch"]["index"] == "https://download.pytorch.org/whl/rocm6.4"
    assert shown["comm"]["plugin"]["name"] == "aws-ofi-nccl-1.18"
    assert shown["comm"]["plugin"]["version"] == "1.18.0"
    assert shown["stages"]["build"]["image"].endswith(":6.4.4-complete")
    assert "multi-node" in shown["description"]


def test_show_of_a_two_site_image_lists_both_sites_and_both_archs():
    result = run_here("show", "csc-cuda")
    shown = yaml.safe_load(result.stdout)
    assert shown["sites"] == ["jean-zay-v100", "jean-zay", "puhti", "mahti"]
    assert shown["gpu_archs"] == ["sm_70", "sm_80"]
    assert shown["cuda_toolkit"] == {"from": "debian", "version": None, "gcc": "13"}


def test_usage_mistakes_are_one_line_errors_with_exit_2():
    for args in ([], ["bogus"], ["render", "--bogus"], ["show"]):
        result = run_here(*args)
        assert result.returncode == 2, args
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: "), args


def test_help_still_works():
    result = run_here("render", "--help")
    assert result.returncode == 0 and "--all" in result.stdout


# --- a newcomer's rough edges (issue 30) ------------------------------------------------------


def test_the_wrong_interpreter_gets_one_line_naming_what_is_missing(tmp_path):
    # a bare venv: none of the builder's dependencies (the system Python a newcomer tries first)
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "builder", "render", "lumi-rocm"],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert "lacks the packages pyyaml, jsonschema, jinja2, cyclonedx-python-lib, spython;" in result.stderr
    assert "make setup" in result.stderr and ".venv/bin/python -m builder" in result.stderr


HIDE_HATCHLING = (
    "import runpy, sys; sys.modules['hatchling'] = None; sys.argv[0] = 'builder'; "
    "runpy.run_module('builder', run_name='__main__')"
)


def test_an_interpreter_without_hatchling_lists_but_does_not_render(tmp_path):
    # hatchling builds the runtime wheel: render needs it, list and publish do not
    def run(*args):
        return subprocess.run(
            [sys.executable, "-c", HIDE_HATCHLING, *args],
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert run("list").returncode == 0
    result = run("render", "lumi-rocm", "--out", tmp_path / "out")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "lacks the package hatchling (it builds the runtime wheel); in a checkout" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_make_jobscript_prints_only_the_script(tmp_path):
    result = subprocess.run(
        ["make", "--no-print-directory", "jobscript", "TARGET=cpu", "NODES=1", "ARGS=examples/ddp_cnn.py --epochs 2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("#!/bin/bash\n"), result.stdout[:300]
    assert "builder jobscript" not in result.stdout.splitlines()[-1]
    script = tmp_path / "job.sh"
    script.write_text(result.stdout)
    assert subprocess.run(["bash", "-n", str(script)], timeout=30).returncode == 0


@pytest.mark.parametrize(
    "args",
    [
        ["--recipes", "recipes", "list"],
        ["list", "--recipes", "recipes"],
        ["--recipes", "recipes", "show", "cpu"],
        ["verify", "--recipes", "recipes", "--help"],
        ["default", "--recipes", "recipes", "--help"],
        ["toolbox", "--recipes", "recipes", "status"],
    ],
    ids=lambda args: " ".join(args),
)
def test_recipes_is_taken_before_and_after_every_command(args):
    result = run_here(*args)
    assert result.returncode == 0, result.stderr


def test_recipes_before_the_command_is_not_undone_by_the_commands_default(tmp_path):
    result = run_here("--recipes", tmp_path / "none", "list")
    assert result.returncode == 2 and f"{tmp_path / 'none'}: recipes directory not found" in result.stderr


@pytest.mark.parametrize("command", sorted(command.name for command in COMMANDS))
def test_every_command_has_help_ending_in_an_example(command):
    result = run_here(command, "--help")
    assert result.returncode == 0, result.stderr
    tail = result.stdout.rstrip().splitlines()[-2:]
    assert tail[0] == "example:" and tail[1].strip().startswith(f"python -m builder {command}")


def test_a_program_without_dashes_gets_the_hint_to_put_it_after_them():
    result = run_here("jobscript", "lumi-rocm", "train.py", "--epochs", "3")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert (
        "put the program and its arguments after --, e.g. python -m builder jobscript lumi-rocm "
        "-- train.py --epochs 3" in result.stderr
    )


def test_the_smoke_suites_options_before_dashes_get_the_same_hint():
    result = run_here("smoke", "cpu", "--sizes", "8:1M")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "put the smoke suite's arguments after --, e.g. python -m builder smoke cpu -- --sizes 8:1M" in result.stderr


@pytest.mark.parametrize(
    "args, suggestion",
    [
        (["show", "lumi-rcom"], "did you mean 'lumi-rocm'?"),
        (["render", "h100cuda"], "did you mean 'h100-cuda'?"),
        (["jobscript", "a100-cuda", "--site", "jeanzay", "--", "t.py"], "did you mean 'jean-zay'?"),
        (["jobscript", "cpu", "--launch", "torchrn", "--", "t.py"], "did you mean 'torchrun'?"),
    ],
)
def test_a_near_miss_gets_did_you_mean(args, suggestion):
    result = run_here(*args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.rstrip().endswith(suggestion), result.stderr


def test_no_suggestion_for_a_name_like_none_of_them():
    result = run_here("show", "zzzzzz")
    assert result.returncode == 2 and "did you mean" not in result.stderr


@pytest.fixture
def broken_lumi(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    site = recipes / "sites" / "lumi.yaml"
    site.write_text(site.read_text().replace("per_node: 8", "per_node: eight", 1))
    return recipes


def test_a_broken_site_file_does_not_block_targets_that_do_not_use_it(broken_lumi):
    shown = run_here("show", "cpu", "--recipes", broken_lumi)
    assert shown.returncode == 0, shown.stderr
    listed = run_here("list", "--recipes", broken_lumi)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert "  lumi-rocm     unusable: its site lumi is broken" in lines
    assert any(line.startswith(f"  lumi          broken: {broken_lumi}/sites/lumi.yaml:") for line in lines)


@pytest.mark.parametrize("args", [["show", "lumi-rocm"], ["check"], ["render", "--all"]])
def test_a_broken_site_file_is_named_by_every_command_that_needs_it(broken_lumi, tmp_path, args):
    result = run_here(*args, "--recipes", broken_lumi, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: {broken_lumi}/sites/lumi.yaml:"), result.stderr
    assert not (tmp_path / "containers").exists()


def test_doctor_outside_a_checkout_reports_the_host_and_the_installed_recipes(tmp_path):
    result = run_here("doctor", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = dict(line.split(None, 1) for line in result.stdout.splitlines() if line.strip())
    assert rows["recipes"].endswith("(installed with the builder)") and "apptainer" in rows and "mirror" in rows
