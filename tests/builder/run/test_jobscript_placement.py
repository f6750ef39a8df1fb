"""`builder jobscript`: where a job goes (builder/run/job_placement.py). The partition, QoS,
time, memory and account each site asks for, in its own form, and one line that writes nothing
for a request the site cannot serve."""

import shutil

import pytest
from conftest import ROOT
from helpers.cli_here import run_here
from helpers.job_scripts import make, sbatch_lines

from builder.recipes.tree import RecipeTree

# a Karolina job as its users ask for one: the project is required there
KAROLINA = ["a100-cuda", "--site", "karolina", "--account", "OPEN-00-00"]


@pytest.fixture
def project(tmp_path):
    """A project folder holding the program the command lines name: the script runs it by its path."""
    (tmp_path / "train.py").write_text("print('training')\n")
    return tmp_path


def test_the_mem_line_follows_the_sites_rule(tree):
    assert "mem" not in sbatch_lines(make(tree, "a100-cuda", site="mahti")[1])  # none
    assert sbatch_lines(make(tree, "v100-cuda", site="puhti", gpus=2)[1]).get("mem") is None  # part
    assert sbatch_lines(make(tree, "lumi-rocm", gpus=1)[1])["mem"] == "60G"  # per GPU


@pytest.mark.parametrize(
    "args, message",
    [
        (["lumi-rocm", "--gpus", "9"], "--gpus 9: lumi has 8 GPUs per node"),
        (["cpu", "--gpus", "1"], "--gpus 1: site local has no GPUs"),
        (["lumi-rocm", "--tasks-per-node", "2"], "on lumi ranks follow the GPUs (one per GPU); use --gpus"),
        (
            ["lumi-rocm", "--nodes", "5", "--gpus", "2", "--launch", "srun"],
            "no partition of lumi fits 5 node(s) x 2 GPUs for 01:00:00 (standard-g: whole nodes only; "
            "small-g: 5 nodes > 4)",
        ),
        (
            ["lumi-rocm", "--time", "4-00:00:00"],
            "(standard-g: --time 4-00:00:00 > 2-00:00:00; small-g: --time 4-00:00:00 > 3-00:00:00)",
        ),
        (
            ["lumi-rocm", "--partition", "eap"],
            "--partition eap: not a partition of lumi; expected one of: dev-g, standard-g, small-g",
        ),
        (
            ["a100-cuda", "--site", "mahti", "--partition", "gpusmall"],
            "--partition gpusmall does not fit this job (4 GPUs per node > 2)",
        ),
        (
            ["lumi-rocm", "--nodes", "2", "--gpus", "4", "--launch", "torchrun"],
            "a multi-node torchrun job takes whole nodes (8 GPUs); use --launch srun",
        ),
        (
            ["lumi-rocm", "--launch", "ssh"],
            "unknown launch mode 'ssh'; expected one of: torchrun, srun, mpirun, deepspeed",
        ),
        (
            ["lumi-rocm", "--launch", "mpirum"],
            "unknown launch mode 'mpirum'; expected one of: torchrun, srun, mpirun, deepspeed; did you mean 'mpirun'?",
        ),
        (["v100-cuda", "--site", "mahti"], "target v100-cuda is built for sm_70; site mahti has sm_80"),
        (["h100-cuda", "--site", "jean-zay"], "target h100-cuda is built for sm_90; site jean-zay has sm_80"),
        (["v100-cuda", "--site", "nowhere"], "unknown site 'nowhere'"),
        (["lumi-rocm", "--time", "soon"], "--time 'soon': expected a Slurm time"),
        # Karolina: qgpu up to 16 nodes, qgpu_big above (min_nodes: 17), 72 nodes in all
        (
            [*KAROLINA, "--nodes", "20", "--partition", "qgpu"],
            "--partition qgpu does not fit this job (20 nodes > 16); qgpu_big takes it",
        ),
        (
            [*KAROLINA, "--nodes", "2", "--partition", "qgpu_big"],
            "--partition qgpu_big does not fit this job (2 nodes < 17); qgpu takes it",
        ),
        (
            [*KAROLINA, "--nodes", "80"],
            "no partition of karolina fits 80 node(s) x 8 GPUs for 01:00:00 (qgpu: 80 nodes > 16; "
            "qgpu_big: 80 nodes > 72)",
        ),
        (
            [*KAROLINA, "--nodes", "80", "--partition", "qgpu_big"],
            "--partition qgpu_big does not fit this job (80 nodes > 72)\n",  # and no other takes it
        ),
        (
            [*KAROLINA, "--partition", "qgpu_free", "--time", "20:00:00"],
            "--partition qgpu_free does not fit this job (--time 20:00:00 > 18:00:00); qgpu takes it",
        ),
        (
            [*KAROLINA, "--partition", "qgpu_free", "--gpus", "4"],
            "--partition qgpu_free does not fit this job (whole nodes only); qgpu takes it",
        ),
        (
            ["a100-cuda", "--site", "jean-zay", "--nodes", "3", "--time", "30:00:00"],
            "no QoS of jean-zay fits 24 GPUs for 30:00:00 (qos_gpu_a100-t3: --time 30:00:00 > 20:00:00; "
            "qos_gpu_a100-t4: 24 GPUs > 16)",
        ),
    ],
)
def test_a_request_the_site_cannot_serve_is_one_line_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "job.sh"
    result = run_here("jobscript", *args, "--out", out, "--", "train.py")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_a_test_qos_is_used_only_when_named(tree):
    plan, text = make(tree, "v100-cuda", site="jean-zay-v100", time="01:00:00")
    assert sbatch_lines(text)["qos"] == "qos_gpu-t3"
    plan, text = make(tree, "v100-cuda", site="jean-zay-v100", time="01:00:00", qos="qos_gpu-dev")
    assert sbatch_lines(text)["qos"] == "qos_gpu-dev" and "QoS qos_gpu-dev: as asked" in plan.why
    assert "--qos qos_gpu-dev" in text.splitlines()[2]


def test_the_site_sets_the_time_a_script_asks_for_when_the_user_gives_none(tmp_path):
    recipes = shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    with open(recipes / "sites" / "local.yaml", "a") as site:
        site.write('slurm:\n  time: "00:20:00"\n')
    tree = RecipeTree(recipes)
    plan, text = make(tree, "cpu")
    assert sbatch_lines(text)["time"] == "00:20:00" and "--time 00:20:00" in text.splitlines()[2]
    assert "time 00:20:00: the site's default (slurm.time)" in plan.why
    plan, text = make(tree, "cpu", time="02:00:00")  # the user's own time wins
    assert sbatch_lines(text)["time"] == "02:00:00" and not any("slurm.time" in why for why in plan.why)
    plan, text = make(RecipeTree(ROOT / "recipes"), "cpu")  # a site that says none: 01:00:00
    assert sbatch_lines(text)["time"] == "01:00:00"


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["v100-cuda", "--site", "jean-zay-v100", "--qos", "qos_gpu-dve"],
            "--qos qos_gpu-dve: not a QoS of jean-zay-v100; expected one of: qos_gpu-t3, qos_gpu-t4, "
            "qos_gpu-dev; did you mean 'qos_gpu-dev'?",
        ),
        (
            ["v100-cuda", "--site", "jean-zay-v100", "--qos", "qos_gpu-dev", "--time", "3:00:00"],
            "--qos qos_gpu-dev does not fit this job (--time 3:00:00 > 02:00:00)",
        ),
        (["cpu", "--qos", "normal"], "--qos normal: not a QoS of local; expected one of: none"),
    ],
)
def test_a_qos_the_site_cannot_give_is_one_line(args, message):
    result = run_here("jobscript", *args, "--", "train.py")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (["lumi-rocm"], "--account is required on lumi: the project to bill, such as project_465000000"),
        (
            ["a100-cuda", "--site", "karolina"],
            "--account is required on karolina: the project to bill, such as OPEN-00-00",
        ),
        (
            ["lumi-rocm", "--account", "465000000"],
            "--account 465000000: not of lumi's form; expected one "
            "such as project_465000000 (matching ^project_[0-9]{9}$)",
        ),
        # IDRIS bills hours per GPU kind: a V100 project on the H100 partition is a mistake
        (
            ["h100-cuda", "--account", "abc@v100"],
            "--account abc@v100: not of jean-zay-h100's form; expected one such as abc@h100",
        ),
        (["a100-cuda", "--site", "jean-zay", "--account", "abc@h100"], "not of jean-zay's form"),
    ],
)
def test_an_account_the_site_would_refuse_is_one_line(tmp_path, args, message):
    result = run_here("jobscript", *args, "--out", tmp_path / "job.sh", "--", "train.py")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr and not (tmp_path / "job.sh").exists()


@pytest.mark.parametrize(
    "args, account",
    [
        (["lumi-rocm", "--account", "project_465000123"], "project_465000123"),
        (["h100-cuda", "--account", "abc@h100"], "abc@h100"),
        (["v100-cuda", "--site", "jean-zay-v100", "--account", "abc@gpu"], "abc@gpu"),  # IDRIS's older form
    ],
)
def test_an_account_of_the_sites_form_is_written(project, args, account):
    result = run_here("jobscript", *args, "--", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert f"#SBATCH --account={account}" in result.stdout.splitlines()


def test_a_site_that_does_not_require_an_account_names_its_form_in_a_comment(project):
    result = run_here("jobscript", "h100-cuda", "--", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert '# Your project: add a line "#SBATCH --account=..." (on jean-zay-h100: abc@h100).' in result.stdout


@pytest.mark.parametrize(
    "nodes, partition, skipped",
    [(1, "qgpu", ""), (2, "qgpu", ""), (16, "qgpu", ""), (17, "qgpu_big", "; skipped qgpu: 17 nodes > 16")],
)
def test_karolina_gives_a_job_of_up_to_16_nodes_qgpu_and_a_larger_one_qgpu_big(tree, nodes, partition, skipped):
    """IT4I's qgpu_big is "intended for big jobs (>16 nodes)": its floor (min_nodes: 17) keeps
    smaller jobs on qgpu; the test, free and preemptible queues are never chosen unasked."""
    plan, text = make(tree, "a100-cuda", site="karolina", nodes=nodes)
    assert sbatch_lines(text)["partition"] == partition and sbatch_lines(text)["nodes"] == str(nodes)
    assert any(why.startswith(f"partition {partition} (") and why.endswith(f"that fits{skipped}") for why in plan.why)


def karolina_with_qgpu_preempt_first(tmp_path, only_when_named=True) -> RecipeTree:
    """A copy of the recipes whose Karolina lists qgpu_preempt first, where it would fit any job."""
    recipes = shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    path = recipes / "sites" / "karolina.yaml"
    text = path.read_text()
    block = text[text.index("    qgpu_preempt:\n") : text.index("network:")]
    moved = block if only_when_named else block.replace("      only_when_named: true\n", "")
    path.write_text(text.replace(block, "").replace("  partitions:\n", "  partitions:\n" + moved))
    return RecipeTree(recipes)


def test_a_partition_only_when_named_is_never_chosen_unasked_even_first_and_fitting(tmp_path):
    tree = karolina_with_qgpu_preempt_first(tmp_path)
    assert tree.sites["karolina"].slurm.partitions[0].name == "qgpu_preempt"
    plan, text = make(tree, "a100-cuda", site="karolina", nodes=2)
    assert sbatch_lines(text)["partition"] == "qgpu" and not any("qgpu_preempt" in why for why in plan.why)
    plan, text = make(tree, "a100-cuda", site="karolina", nodes=2, partition="qgpu_preempt")
    assert sbatch_lines(text)["partition"] == "qgpu_preempt"
    assert "partition qgpu_preempt (lowest priority: killed when others need the nodes and queued again, " in (
        " ".join(plan.why)
    )
    # the flag, not the order, keeps it out: without it the first partition that fits is taken
    plan, text = make(
        karolina_with_qgpu_preempt_first(tmp_path / "plain", only_when_named=False),
        "a100-cuda",
        site="karolina",
        nodes=2,
    )
    assert sbatch_lines(text)["partition"] == "qgpu_preempt"
