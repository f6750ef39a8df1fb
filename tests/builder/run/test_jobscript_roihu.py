"""`builder jobscript` on Roihu's GPU partition (CSC's user guide, 2026-08-21): partitions by GPUs
per job, the account's form, staging onto the node's own TMPDIR and onto the NVMe pool, and every
script through bash -n and shellcheck."""

import itertools
import shutil
import subprocess

import pytest
from conftest import ROOT
from helpers.cli_here import run_here
from helpers.job_scripts import make, sbatch_lines

from builder.recipes.tree import RecipeTree
from builder.run.jobscript import LAUNCHES

# Until recipes/targets/gh200-cuda.yaml lands, a stand-in of the same name: the H100 image's
# recipe (sm_90) on Roihu's aarch64 nodes. Partition, GPU and core choices are the site's, not
# the image's, so the tests hold for the real target too.
GH200_STAND_IN = """\
description: stand-in GH200 image for the job-script tests (the H100 image's recipe on Roihu)
extends: h100-cuda
sites: [roihu]
arch: aarch64
"""


ROIHU_ACCOUNT = "project_2001234"


@pytest.fixture
def roihu_recipes(tmp_path):
    recipes = shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    target = recipes / "targets" / "gh200-cuda.yaml"
    if not target.exists():
        target.write_text(GH200_STAND_IN)
    return recipes


@pytest.mark.parametrize(
    "asked, options",
    [
        # CSC's partial-node example (example-job-scripts-roihu.md): one task, 72 cores, 1 GPU
        (
            dict(gpus=1),
            {"partition": "gpumedium", "gres": "gpu:gh200:1", "ntasks-per-node": "1", "cpus-per-task": "72"},
        ),
        (dict(gpus=2), {"partition": "gpumedium", "gres": "gpu:gh200:2", "cpus-per-task": "144"}),
        (dict(), {"partition": "gpumedium", "gres": "gpu:gh200:4", "cpus-per-task": "288"}),
        # 2 nodes x 2 GPUs is 4 GPUs per job: still gpumedium
        (dict(nodes=2, gpus=2, launch="srun"), {"partition": "gpumedium", "gres": "gpu:gh200:2", "nodes": "2"}),
        # CSC's full-node example: gpularge, a task per GPU of 72 cores, gh200:4
        (
            dict(nodes=2, launch="srun"),
            {"partition": "gpularge", "gres": "gpu:gh200:4", "ntasks-per-node": "4", "cpus-per-task": "72"},
        ),
        (dict(nodes=10), {"partition": "gpularge", "nodes": "10", "ntasks-per-node": "1", "cpus-per-task": "288"}),
    ],
    ids=["1-gpu", "2-gpus", "4-gpus", "2-nodes-x-2-gpus", "2-nodes-srun", "10-nodes"],
)
def test_roihu_takes_up_to_4_gpus_per_job_on_gpumedium_and_more_on_gpularge(roihu_recipes, asked, options):
    plan, text = make(RecipeTree(roihu_recipes), "gh200-cuda", **asked)
    found = sbatch_lines(text)
    assert {key: found.get(key) for key in options} == options, text
    assert found["account"] == ROIHU_ACCOUNT and "mem" not in found  # CSC's GPU examples ask no --mem
    assert f"export OMP_NUM_THREADS={plan.placement.cores_per_rank}" in text and plan.placement.cores_per_rank == 72


def test_roihus_choice_says_which_partition_was_skipped_and_why(roihu_recipes):
    plan, _ = make(RecipeTree(roihu_recipes), "gh200-cuda", nodes=2)
    assert (
        "partition gpularge (4 GPUs per node; CSC grants it after a scalability test, which the project "
        "applies for): the first of the site's that fits; skipped gpumedium: 8 GPUs per job > 4"
    ) in plan.why


# The options after `gh200-cuda --account ...`, and what the one line says
ROIHU_REFUSALS = [
    (
        ["--partition", "gpumedium", "--nodes", "2"],
        "--partition gpumedium does not fit this job (8 GPUs per job > 4)",
    ),
    (["--partition", "gpularge", "--gpus", "2"], "--partition gpularge does not fit this job (2 GPUs per job < 4)"),
    (
        ["--partition", "gpularge", "--nodes", "2", "--gpus", "2", "--launch", "srun"],
        "--partition gpularge does not fit this job (whole nodes only)",
    ),
    (["--gpus", "5"], "--gpus 5: roihu has 4 GPUs per node"),
    (["--partition", "gputest", "--nodes", "3"], "--partition gputest does not fit this job (3 nodes > 2)"),
    (
        ["--nodes", "3", "--gpus", "2", "--launch", "srun"],
        "no partition of roihu fits 3 node(s) x 2 GPUs for 01:00:00 (gpumedium: 6 GPUs per job > 4; "
        "gpularge: whole nodes only)",
    ),
    (["--nodes", "11"], "(gpumedium: 11 nodes > 4; gpularge: 11 nodes > 10)"),
    (
        ["--time", "2-00:00:00"],
        "(gpumedium: --time 2-00:00:00 > 1-12:00:00; gpularge: --time 2-00:00:00 > 1-12:00:00)",
    ),
]


@pytest.mark.parametrize("args, message", ROIHU_REFUSALS, ids=[" ".join(args) for args, _ in ROIHU_REFUSALS])
def test_a_job_roihus_partitions_cannot_take_is_one_line_and_writes_nothing(roihu_recipes, tmp_path, args, message):
    out = tmp_path / "job.sh"
    result = run_here(
        "jobscript",
        "--recipes",
        roihu_recipes,
        "gh200-cuda",
        "--account",
        ROIHU_ACCOUNT,
        *args,
        "--out",
        out,
        "--",
        "train.py",
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == "" and not out.exists()


def test_roihu_needs_an_account_of_csc_form(roihu_recipes):
    result = run_here("jobscript", "--recipes", roihu_recipes, "gh200-cuda", "--", "train.py")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "--account is required on roihu: the project to bill, such as project_2001234" in result.stderr


def test_roihu_stages_onto_the_nodes_own_tmpdir(roihu_recipes):
    from builder.render.sitefile import render_site

    tree = RecipeTree(roihu_recipes)
    _, text = make(tree, "gh200-cuda", gpus=1, stage=("/scratch/project_2001234/data",))
    assert "export SING_STAGE=/scratch/project_2001234/data\n" in text and "trap 'unstage' EXIT\n" in text
    # node-local NVMe, 150 GiB per user on GPU nodes (roihu-disk.md): the only stage root
    assert "HPCML_STAGE_ROOTS=('$TMPDIR')\n" in render_site(tree.sites["roihu"])
    assert "--exclusive" not in text and "#BB_LUA" not in text  # the shared NVMe pool is not asked for


def test_roihus_nvme_pool_is_asked_with_the_users_name_and_exclusive_and_staged_onto(roihu_recipes, monkeypatch):
    monkeypatch.setenv("USER", "alice")
    stage = ("/scratch/project_2001234/data",)
    plan, text = make(RecipeTree(roihu_recipes), "gh200-cuda", nodes=2, stage=stage, nvme_pool="100G")
    found = sbatch_lines(text)
    # creating-job-scripts-roihu.md: --exclusive, then the --bb line with the user's name written out
    assert found["bb"] == '"#BB_LUA SBF storagesize=100G path=/run/sbb/alice"' and found["exclusive"] is not None
    assert found["partition"] == "gpularge" and found["gres"] == "gpu:gh200:4"
    assert list(found).index("exclusive") < list(found).index("bb") < list(found).index("time")
    assert "--nvme-pool 100G" in text.splitlines()[2] and not plan.notes  # whole nodes: no billing note
    # the wrapper stages into the pool: the script hands it the path, $USER expanded when the job runs
    export = next(line for line in text.splitlines() if line.startswith("export HPCML_NODE_LOCAL="))
    shown = subprocess.run(
        ["bash", "-c", export + '; echo "$HPCML_NODE_LOCAL"'], env={"USER": "bob"}, capture_output=True, text=True
    )
    assert shown.stdout == "/run/sbb/bob\n", shown.stderr


def test_an_nvme_pool_on_part_of_a_node_says_it_bills_the_whole_node(roihu_recipes, monkeypatch):
    monkeypatch.setenv("USER", "alice")
    plan, text = make(RecipeTree(roihu_recipes), "gh200-cuda", gpus=1, nvme_pool="20GB")
    assert "exclusive" in sbatch_lines(text) and "storagesize=20GB path=/run/sbb/alice" in text
    assert plan.notes == (
        "--nvme-pool needs --exclusive on roihu: the job is billed for all 4 GPUs of each node, not the 1 it uses",
    )


@pytest.mark.parametrize(
    "target, size, message",
    [
        ("gh200-cuda", "100", "--nvme-pool 100: not a size; expected gigabytes or terabytes such as 100G or 2T"),
        ("gh200-cuda", "1.5T", "--nvme-pool 1.5T: not a size"),
        ("cpu", "100G", "--nvme-pool 100G: local has no NVMe pool (scratch.pool)"),
    ],
)
def test_an_nvme_pool_a_site_cannot_give_is_one_line_and_writes_nothing(roihu_recipes, tmp_path, target, size, message):
    out = tmp_path / "job.sh"
    account = ["--account", ROIHU_ACCOUNT] if target == "gh200-cuda" else []
    result = run_here(
        "jobscript", "--recipes", roihu_recipes, target, *account, "--nvme-pool", size, "--out", out, "--", "train.py"
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


def test_every_roihu_script_passes_bash_n_and_shellcheck(roihu_recipes, tmp_path, monkeypatch):
    monkeypatch.setenv("USER", "alice")
    tree, written = RecipeTree(roihu_recipes), []
    for launch, nodes in itertools.product(LAUNCHES, (1, 2)):
        pool = "100G" if nodes == 2 else ""  # the NVMe pool's lines too
        _, text = make(tree, "gh200-cuda", launch=launch, nodes=nodes, nvme_pool=pool, program=("-m", "smoke", "all"))
        path = tmp_path / f"roihu.{launch}.{nodes}.sh"
        path.write_text(text)
        written.append(str(path))
        result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, (path.name, result.stderr)
    assert shutil.which("shellcheck"), "make setup installs shellcheck"
    result = subprocess.run(["shellcheck", "--severity=style", *written], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
