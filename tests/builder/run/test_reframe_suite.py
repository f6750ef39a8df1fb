"""`hpcml reframe` (builder/run/reframe_suite.py, reframe_settings.py): the folder it writes
for every target on each of its sites, the allocation each check asks ReFrame for against its
job script's #SBATCH lines, the settings file as a Python literal whatever a site file holds,
and ReFrame itself listing and dry-running every site's checks (marker tools). The checks run
for real on the two-node cluster: tests/cluster/test_reframe.py."""

import ast
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.cli_here import run_here
from helpers.job_scripts import sbatch_lines
from hypothesis import given
from hypothesis import strategies as st

from builder.run import reframe_settings, reframe_suite
from builder.run.job_request import Request

# each site with a target of its own (the example account where the site wants one)
PAIRS = [
    ("cpu", "local"),
    ("lumi-rocm", "lumi"),
    ("a100-cuda", "karolina"),
    ("a100-cuda", "jean-zay"),
    ("a100-cuda", "mahti"),
    ("v100-cuda", "jean-zay-v100"),
    ("v100-cuda", "puhti"),
    ("h100-cuda", "jean-zay-h100"),
    ("gh200-cuda", "roihu"),
]


def test_the_pairs_name_every_site(tree):
    assert sorted(site for _, site in PAIRS) == sorted(tree.sites)


def written(tree, target, site, **asked):
    site_model = tree.sites[site]
    if site_model.slurm.account and site_model.slurm.account.required:
        asked.setdefault("account", site_model.slurm.account.example)
    request = Request(site=site, nodes=2, wrapper="singularity_wrapper", **asked)
    return reframe_suite.suite(tree, target, request, "slurm")


@pytest.mark.parametrize("target,site", PAIRS)
def test_each_check_asks_reframe_for_what_its_job_script_names(tree, target, site):
    files = written(tree, target, site)
    params = json.loads(files[reframe_suite.PARAMS])
    assert sorted(params["checks"]) == sorted(check.name for check in reframe_suite.CHECKS)
    for name, spec in params["checks"].items():
        directives = sbatch_lines(files[spec["script"]])
        assert spec["nodes"] == int(directives["nodes"]) == (2 if name in ("allreduce", "ddp") else 1)
        assert spec["tasks_per_node"] == int(directives["ntasks-per-node"])
        assert spec["cpus_per_task"] == int(directives["cpus-per-task"])
        # every other #SBATCH line goes to ReFrame's job as it stands in the script
        others = {f"--{key}={value}" if value else f"--{key}" for key, value in directives.items()}
        owned = {option for option in others if option[2:].split("=")[0] in reframe_suite.OWNED}
        assert set(spec["options"]) == others - owned
        assert f"-m smoke {name}" in files[spec["script"]].splitlines()[-1]


def test_the_allreduce_sweep_ends_at_the_references_size_and_reframe_judges_the_same_floor(tree):
    files = written(tree, "lumi-rocm", "lumi")
    spec = json.loads(files[reframe_suite.PARAMS])["checks"]["allreduce"]
    lumi = tree.sites["lumi"]
    two = [ref for ref in lumi.allreduce if ref.nodes == 2]
    assert two, "lumi's site file has a two-node reference"
    expected = min(two, key=lambda ref: ref.bytes)
    assert spec["reference"]["bytes"] == expected.bytes and spec["reference"]["busbw_gbs"] == expected.busbw_gbs
    assert files["jobs/allreduce.sh"].rstrip().endswith(f"-m smoke allreduce --sizes 8:{expected.bytes}")


def test_a_site_without_a_reference_for_the_shape_leaves_busbw_unjudged(tree):
    local = replace(tree.sites["local"], allreduce=())
    assert reframe_suite.pick_reference(local, 2) is None
    assert reframe_suite.pick_reference(tree.sites["local"], 2)["tolerance"] == 0.8  # the 1-node floor


@pytest.mark.parametrize("target,site", PAIRS)
def test_the_settings_are_one_python_literal_of_the_sites_system(tree, target, site):
    text = written(tree, target, site)[reframe_suite.SETTINGS]
    module = ast.parse(text)
    assert [type(node) for node in module.body] == [ast.Assign]
    config = ast.literal_eval(module.body[0].value)
    assert config == reframe_settings.configuration(tree.sites[site], "slurm")
    assert config["systems"][0]["name"] == site and config["systems"][0]["partitions"][0]["launcher"] == "local"


@given(st.text(max_size=60))
def test_any_site_description_stays_a_literal_of_itself(tree, description):
    site = replace(tree.sites["local"], description=description)
    module = ast.parse(reframe_settings.settings(site, "squeue"))
    assert ast.literal_eval(module.body[0].value)["systems"][0]["descr"] == description
    assert len(module.body) == 1


def test_the_command_writes_the_folder_with_the_checks_beside_it(tmp_path):
    out = tmp_path / "checks"
    result = run_here("reframe", "cpu", "--site", "local", "--nodes", "2", "--scheduler", "squeue", "--out", out)
    assert result.returncode == 0, result.stderr
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "hpcml_checks.json",
        "hpcml_checks.py",
        "jobs/allreduce.sh",
        "jobs/ddp.sh",
        "jobs/deepspeed.sh",
        "jobs/preflight.sh",
        "settings.py",
    ]
    assert "'scheduler': 'squeue'" in (out / "settings.py").read_text()
    assert f"reframe -C {out}/settings.py -c {out}/hpcml_checks.py -r" in result.stderr


@pytest.mark.parametrize(
    "args,expected",
    [
        (("--scheduler", "pbs"), "invalid choice: 'pbs'"),
        (("--site", "nowhere"), "nowhere"),
        (("--nodes", "0"), "--nodes"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, expected):
    out = tmp_path / "checks"
    result = run_here("reframe", "cpu", "--out", out, *args)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def reframe(*args, cwd):
    command = [str(Path(sys.executable).with_name("reframe")), *map(str, args)]
    env = {key: value for key, value in os.environ.items() if not key.startswith("RFM_")}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.tools
@pytest.mark.parametrize("target,site", PAIRS)
def test_reframe_lists_and_dry_runs_every_sites_checks_with_its_settings(tree, tmp_path, target, site):
    out = tmp_path / "checks"
    reframe_suite.write(out, written(tree, target, site))
    listed = reframe("-C", out / "settings.py", "-c", out / "hpcml_checks.py", "-t", "production", "-l", cwd=tmp_path)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "Found 4 check(s)" in listed.stdout
    dry = reframe("-C", out / "settings.py", "-c", out / "hpcml_checks.py", "-t", "ml", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr
    assert "Ran 4/4 test case(s)" in dry.stdout
    job = (tmp_path / "stage" / site / "jobs" / "builtin" / "HpcmlAllreduce" / "rfm_job.sh").read_text()
    assert f"bash {out}/jobs/allreduce.sh" in job and "#SBATCH --nodes=2" in job
