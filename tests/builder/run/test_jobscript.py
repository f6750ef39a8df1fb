"""`builder jobscript`: what it chooses per site, size and launch mode (table-driven, from the
site files), that every script it writes passes bash -n and shellcheck, that impossible
requests are one-line errors, and that the local site's scripts run the smoke suite under
the test suite's real Slurm cluster."""

import itertools
import json
import re
import shutil
import subprocess

import pytest
from conftest import ROOT
from helpers.cli_here import run_here

from builder.errors import RecipeError
from builder.recipes.tree import RecipeTree
from builder.run import jobscript
from builder.run.jobscript import LAUNCHES, Request

WRAPPER = str(ROOT / "wrappers" / "singularity_wrapper")


def make(tree, target, **asked):
    """Plan and script; a site that requires an account gets its example one."""
    asked.setdefault("program", ("train.py", "--epochs", "10"))
    asked.setdefault("wrapper", "singularity_wrapper")
    site = tree.sites[asked.get("site") or tree.target(target).sites[0].name]
    if site.slurm.account and site.slurm.account.required:
        asked.setdefault("account", site.slurm.account.example)
    plan = jobscript.plan(tree, target, Request(**asked))
    return plan, jobscript.script(plan)


@pytest.fixture
def project(tmp_path):
    """A project folder holding the program the command lines name: the script runs it by its path."""
    (tmp_path / "train.py").write_text("print('training')\n")
    return tmp_path


def sbatch_lines(text):
    return dict(re.findall(r"^#SBATCH --([a-z-]+)(?:=(.*))?$", text, re.M))


def launch_line(text):
    return text.rstrip("\n").splitlines()[-1]


# (target, request, the #SBATCH options expected, what the launch line must contain)
CASES = [
    # LUMI, as its guides write them: two GCDs under torchrun on small-g, 14 cores, 120 GB ...
    (
        "lumi-rocm",
        dict(gpus=2, launch="torchrun"),
        {"partition": "small-g", "gpus-per-node": "2", "ntasks-per-node": "1", "cpus-per-task": "14", "mem": "120G"},
        "torchrun --standalone --nnodes=1 --nproc-per-node=2 train.py",
    ),
    # ... a whole node on standard-g, one task per GCD with the site's CPU masks ...
    (
        "lumi-rocm",
        dict(launch="srun"),
        {"partition": "standard-g", "gpus-per-node": "8", "ntasks-per-node": "8", "cpus-per-task": "7", "mem": "480G"},
        "srun --kill-on-bad-exit=1 --mpi=pmi2 --cpu-bind=mask_cpu:0x00fe000000000000,",
    ),
    # ... and two nodes under torchrun use all 8 GCDs of each (CSC's example used 4)
    (
        "lumi-rocm",
        dict(nodes=2, launch="torchrun"),
        {"partition": "standard-g", "nodes": "2", "ntasks-per-node": "1", "cpus-per-task": "56"},
        '--nnodes="$SLURM_JOB_NUM_NODES" --nproc-per-node=8 --rdzv-id="$SLURM_JOB_ID" '
        '--rdzv-backend=c10d --rdzv-endpoint="$rdzv_host:29400" train.py',
    ),
    # DeepSpeed across nodes: a task per GPU and ranks from Slurm, never the launcher's ssh
    (
        "lumi-rocm",
        dict(nodes=2, launch="deepspeed"),
        {"ntasks-per-node": "8", "cpus-per-task": "7"},
        "singularity_wrapper exec python -m launchenv -- python train.py",
    ),
    (
        "lumi-rocm",
        dict(gpus=4, launch="deepspeed"),
        {"partition": "small-g", "ntasks-per-node": "1", "cpus-per-task": "28", "mem": "240G"},
        "singularity_wrapper exec deepspeed --num_gpus=4 train.py",
    ),
    # Mahti: gpusmall up to 2 GPUs, gpumedium above; gres with the GPU type; no --mem
    (
        "a100-cuda",
        dict(site="mahti", gpus=2, launch="srun"),
        {"partition": "gpusmall", "gres": "gpu:a100:2", "ntasks-per-node": "2", "cpus-per-task": "32"},
        "srun --kill-on-bad-exit=1 --mpi=pmix_v2 singularity_wrapper exec python -m launchenv -- python train.py",
    ),
    ("a100-cuda", dict(site="mahti", gpus=3, launch="srun"), {"partition": "gpumedium", "gres": "gpu:a100:3"}, "srun"),
    (
        "a100-cuda",
        dict(site="mahti", nodes=2, launch="torchrun"),
        {"partition": "gpumedium", "gres": "gpu:a100:4", "ntasks-per-node": "1", "cpus-per-task": "128"},
        "--nproc-per-node=4",
    ),
    # Puhti: the guide's one task of 40 cores under torchrun, --mem=0 on a whole node
    (
        "v100-cuda",
        dict(site="puhti", launch="torchrun"),
        {"partition": "gpu", "gres": "gpu:v100:4", "ntasks-per-node": "1", "cpus-per-task": "40", "mem": "0"},
        "torchrun --standalone --nnodes=1 --nproc-per-node=4 train.py",
    ),
    (
        "v100-cuda",
        dict(site="puhti", gpus=1, launch="srun"),
        {"partition": "gpu", "gres": "gpu:v100:1", "cpus-per-task": "10"},
        "srun",
    ),
    # Jean Zay: plain gres, one task per GPU, --hint=nomultithread, the A100 constraint
    (
        "a100-cuda",
        dict(site="jean-zay", launch="srun", account="abc@a100"),
        {
            "partition": "gpu_p5",
            "gres": "gpu:8",
            "ntasks-per-node": "8",
            "cpus-per-task": "8",
            "hint": "nomultithread",
            "constraint": "a100",
            "account": "abc@a100",
            "qos": "qos_gpu_a100-t3",
        },
        "srun",
    ),
    # ... its QoS by length: t4 past 20 hours, up to 16 GPUs
    ("a100-cuda", dict(site="jean-zay", nodes=2, time="30:00:00"), {"qos": "qos_gpu_a100-t4"}, "srun"),
    # ... its V100 partition (the default one, no constraint) and its H100 partition
    (
        "v100-cuda",
        dict(site="jean-zay-v100", nodes=2, launch="srun"),
        {
            "partition": "gpu_p13",
            "gres": "gpu:4",
            "ntasks-per-node": "4",
            "cpus-per-task": "10",
            "hint": "nomultithread",
            "constraint": None,
        },
        "srun --kill-on-bad-exit=1 --mpi=pmix singularity_wrapper exec python -m launchenv",
    ),
    (
        "h100-cuda",
        dict(launch="srun"),
        {"partition": "gpu_p6", "gres": "gpu:4", "ntasks-per-node": "4", "cpus-per-task": "24", "constraint": "h100"},
        "srun",
    ),
    # Karolina: --gpus-per-node, MPI ranks from the host's mpirun as IT4I starts them
    (
        "a100-cuda",
        dict(site="karolina", nodes=2, launch="mpirun"),
        {"partition": "qgpu", "gpus-per-node": "8", "ntasks-per-node": "8", "cpus-per-task": "16"},
        'mpirun -np "$SLURM_NTASKS" --map-by ppr:8:node singularity_wrapper exec python -m launchenv -- '
        "python train.py",
    ),
    # Jean Zay's srun launch passes its MPI plugin, so that mpi4py in the program starts
    (
        "a100-cuda",
        dict(site="jean-zay", gpus=2, launch="srun"),
        {"ntasks-per-node": "2"},
        "srun --kill-on-bad-exit=1 --mpi=pmix singularity_wrapper exec python -m launchenv -- python train.py",
    ),
    # The local box: no partition, CPU ranks, the host's mpirun where Slurm has no MPI plugin
    (
        "cpu",
        dict(tasks_per_node=2, launch="torchrun"),
        {"ntasks-per-node": "1", "cpus-per-task": "2"},
        "--nproc-per-node=2 train.py",
    ),
    (
        "cpu",
        dict(tasks_per_node=2, launch="mpirun"),
        {"ntasks-per-node": "2", "cpus-per-task": "1"},
        'mpirun -np "$SLURM_NTASKS" --map-by ppr:2:node singularity_wrapper exec python -m launchenv',
    ),
]


@pytest.mark.parametrize(
    "target, asked, options, launch", CASES, ids=[f"{c[0]}-{c[1].get('site', '')}-{c[1]}" for c in CASES]
)
def test_the_script_asks_in_the_sites_dialect_and_launches_right(tree, target, asked, options, launch):
    plan, text = make(tree, target, **asked)
    found = sbatch_lines(text)
    assert {key: found.get(key) for key in options} == options, text
    assert launch in text, text
    assert "partition" in found or not plan.site.slurm.partitions
    assert f"export OMP_NUM_THREADS={plan.cores_per_rank}" in text
    assert f"export HPCML_SITE={plan.site.name}" in text


def test_the_mem_line_follows_the_sites_rule(tree):
    assert "mem" not in sbatch_lines(make(tree, "a100-cuda", site="mahti")[1])  # none
    assert sbatch_lines(make(tree, "v100-cuda", site="puhti", gpus=2)[1]).get("mem") is None  # part
    assert sbatch_lines(make(tree, "lumi-rocm", gpus=1)[1])["mem"] == "60G"  # per GPU


def test_options_and_the_reasons_are_in_the_script(tree):
    plan, text = make(
        tree,
        "lumi-rocm",
        gpus=2,
        binds=("/scratch/p/data",),
        stage=("/scratch/p/ds",),
        image="/appl/images/lumi.sif",
        account="project_465000001",
    )
    assert "export SING_IMAGE=/appl/images/lumi.sif" in text
    assert "export SING_BIND=/scratch/p/data" in text and "export SING_STAGE=/scratch/p/ds" in text
    assert (
        'unstage() { srun --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 singularity_wrapper unstage || true; }\n'
        "trap 'remove_node_dirs; unstage' EXIT\n"
    ) in text
    # the MIOpen folders the script made go with the job, in the same (only) trap
    assert (
        'remove_node_dirs() { srun --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 rm -rf '
        '"$MIOPEN_USER_DB_PATH" "$MIOPEN_CUSTOM_CACHE_DIR" || true; }\n'
    ) in text
    assert text.count("\ntrap ") == 1
    assert (
        "#   - partition small-g (part of a node): the first of the site's that fits; skipped "
        "standard-g: whole nodes only" in text
    )
    assert "memory 120G: 60 GB per GPU (slurm.mem: per_gpu)" in text
    assert "# Written by hpc-ml-containers" in text and "--account project_465000001" in text
    assert "Your project" not in text  # the account is there
    assert plan.summary() == (
        "lumi: small-g, 1 node(s), 2 GPU(s)/node, 2 task(s)/node x 7 cores, mem 120G, launch srun"
    )  # srun: LUMI's own default


def test_deepspeed_across_nodes_says_it_is_the_srun_launch(tree):
    """The job script and the summary name what runs: srun's line and launchenv's variables,
    neither DeepSpeed's launcher nor its MPI discovery (test_two_nodes runs both)."""
    ds_plan, ds_text = make(tree, "cpu", nodes=2, tasks_per_node=2, launch="deepspeed")
    srun_plan, srun_text = make(tree, "cpu", nodes=2, tasks_per_node=2, launch="srun")
    assert launch_line(ds_text) == launch_line(srun_text)
    lines = ds_text.rstrip("\n").splitlines()
    assert lines[-5:-1] == list(jobscript.DEEPSPEED_ACROSS_NODES)
    comment = " ".join(line.lstrip("# ") for line in lines[-5:-1])
    assert (
        "--launch deepspeed across nodes runs what --launch srun runs: one task per rank, and launchenv "
        "gives each RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR (the first node) and MASTER_PORT from Slurm, "
        "which deepspeed.init_distributed() takes as they are: neither DeepSpeed's launcher (ssh) nor its "
        "MPI discovery runs."
    ) == comment
    assert (
        "#   - launch deepspeed across nodes: the srun launch, ranks from launchenv; DeepSpeed's launcher "
        "and its MPI discovery do not run\n"
    ) in ds_text
    assert ds_plan.summary().endswith(", launch deepspeed (as srun: ranks from launchenv, no DeepSpeed launcher)")
    assert srun_plan.summary().endswith(", launch srun")
    # on one node it is DeepSpeed's launcher, and says so
    one_plan, one_text = make(tree, "cpu", tasks_per_node=2, launch="deepspeed")
    assert "exec deepspeed --num_gpus=2 train.py" in launch_line(one_text)
    assert "srun launch" not in one_text and one_plan.summary().endswith(", launch deepspeed")


@pytest.mark.parametrize(
    "asked, suggestion",
    [
        ("srn", "; did you mean 'srun'?"),
        ("torchrn", "; did you mean 'torchrun'?"),
        ("deepspeeed", "; did you mean 'deepspeed'?"),
        ("ssh", ""),
    ],
)
def test_an_unknown_launch_mode_suggests_the_closest(tree, asked, suggestion):
    with pytest.raises(RecipeError) as raised:
        make(tree, "cpu", launch=asked)
    assert str(raised.value).endswith(
        f"unknown launch mode {asked!r}; expected one of: torchrun, srun, mpirun, deepspeed{suggestion}"
    )


def test_a_retired_site_says_so(tree):
    _, text = make(tree, "v100-cuda", site="puhti")
    assert "# NOTE: puhti's GPU nodes were shut down on 2026-07-31" in text


def every_script(tree):
    """Every target on every site it may run on, every launch mode, one and two nodes."""
    for target_name in sorted(tree.targets):
        for site_name, launch, nodes in itertools.product(sorted(tree.sites), LAUNCHES, (1, 2)):
            try:
                yield (
                    f"{target_name}.{site_name}.{launch}.{nodes}",
                    make(tree, target_name, site=site_name, launch=launch, nodes=nodes, program=("-m", "smoke", "all"))[
                        1
                    ],
                )
            except RecipeError:
                continue  # an arch the image lacks, a size the site refuses


def test_every_script_passes_bash_n_and_shellcheck(tree, tmp_path):
    written = []
    for name, text in every_script(tree):
        path = tmp_path / f"{name}.sh"
        path.write_text(text)
        written.append(path)
        result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, (name, result.stderr)
    assert len(written) >= 60
    assert shutil.which("shellcheck"), "make setup installs shellcheck"
    result = subprocess.run(
        ["shellcheck", "--severity=style", *map(str, written)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:]


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


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("typed", [("python",), ("python3",), ("python3.12",), ("python", "-u")])
def test_a_leading_python_is_dropped_with_a_note_in_every_launch_mode(tree, typed, launch):
    # `-- python train.py` is what most users type; every launch starts python itself
    site = "local" if launch in ("torchrun", "srun", "mpirun") else "lumi"
    target = "cpu" if site == "local" else "lumi-rocm"
    plain, expected = make(tree, target, site=site, launch=launch)
    plan, text = make(tree, target, site=site, launch=launch, program=(*typed, "train.py", "--epochs", "10"))
    assert launch_line(text) == launch_line(expected)
    assert plan.notes == [f"dropped {' '.join(typed)!r} after --: each launch starts python itself"]
    assert plain.notes == []


def test_a_leading_python_before_a_module_keeps_the_module(tree):
    plan, text = make(tree, "cpu", launch="srun", program=("python", "-m", "smoke", "all"))
    assert launch_line(text).endswith("python -m launchenv -- python -m smoke all")


def test_the_note_reaches_stderr_and_the_script_stays_clean(project):
    result = run_here("jobscript", "cpu", "--", "python", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "note: dropped 'python' after --: each launch starts python itself" in result.stderr
    assert "python python" not in result.stdout and "torchrun" in result.stdout


def test_another_python_option_first_is_refused_in_one_line():
    result = run_here("jobscript", "cpu", "--", "python", "-O", "train.py")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "python option -O after --: the job starts python itself" in result.stderr


@pytest.mark.parametrize("target, site", [("cpu", "local"), ("lumi-rocm", "lumi"), ("v100-cuda", "jean-zay-v100")])
def test_every_script_passes_its_cores_to_srun_and_its_output_unbuffered(tree, target, site):
    # Slurm 22.05 and newer: a step's srun does not take --cpus-per-task from the job
    plan, text = make(tree, target, site=site, launch="torchrun")
    cores = sbatch_lines(text)["cpus-per-task"]
    lines = text.splitlines()
    assert f'export SRUN_CPUS_PER_TASK="${{SLURM_CPUS_PER_TASK:-{cores}}}"' in lines
    assert "export PYTHONUNBUFFERED=1" in lines
    first_srun = next(i for i, line in enumerate(lines) if line.startswith("srun"))
    assert lines.index("export PYTHONUNBUFFERED=1") < first_srun


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


def test_no_program_is_a_one_line_error():
    result = run_here("jobscript", "cpu")
    assert result.returncode == 2 and "no program: give it after --" in result.stderr


def test_out_writes_the_same_script_and_the_summary_goes_to_stderr(tmp_path):
    args = [
        "jobscript",
        "a100-cuda",
        "--site",
        "mahti",
        "--gpus",
        "2",
        "--account",
        "project_2001234",
        "--",
        "-m",
        "smoke",
        "all",
    ]
    printed = run_here(*args)
    assert printed.returncode == 0, printed.stderr
    written = run_here(*args[:-4], "--out", tmp_path / "job.sh", *args[-4:])
    assert (tmp_path / "job.sh").read_text() == printed.stdout and written.stdout == ""
    assert printed.stderr.splitlines() == [
        "note: mahti's GPU nodes were shut down on 2026-08-31",
        "mahti: gpusmall, 1 node(s), 2 GPU(s)/node, 1 task(s)/node x 64 cores, launch torchrun",
    ]


# --- what a script loads, and where it finds the wrapper and the image (issue 31) -----------


def prelude(text):
    """The script up to its launch lines: what runs before any srun."""
    return text[: text.rindex("\n\n")] + "\n"


def run_prelude(text, tmp_path, env=None, module=True):
    """The script's set-up in bash, with a `module` that records what it is asked."""
    script = tmp_path / "prelude.sh"
    script.write_text(prelude(text))
    setup = 'module() { echo "module $*" >> "$MODULE_LOG"; }; export -f module; ' if module else ""
    return subprocess.run(
        ["bash", "-c", f'{setup}exec bash "$0"', str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "MODULE_LOG": str(tmp_path / "modules.log"), **(env or {})},
    )


def test_jean_zay_scripts_load_singularity_and_take_the_image_from_the_allowed_folder(tree, tmp_path):
    """Problem 1: nothing loaded singularity, and the image path was images/<target>.sif, which
    Jean Zay will not run; a variable given in --image was written single-quoted."""
    for site, target in (("jean-zay", "a100-cuda"), ("jean-zay-v100", "v100-cuda"), ("jean-zay-h100", "h100-cuda")):
        _, text = make(tree, target, site=site, launch="srun")
        assert "module purge\nmodule load singularity\n" in text
        assert f'export SING_IMAGE="${{SINGULARITY_ALLOWED_DIR}}"/{target}.sif\n' in text
    _, text = make(tree, "a100-cuda", site="jean-zay", image="$SINGULARITY_ALLOWED_DIR/my model.sif", wrapper=WRAPPER)
    assert "export SING_IMAGE=\"${SINGULARITY_ALLOWED_DIR}\"'/my model.sif'\n" in text
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "my model.sif").write_bytes(b"image")
    ran = run_prelude(text, tmp_path, env={"SINGULARITY_ALLOWED_DIR": str(allowed)})
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "modules.log").read_text() == "module purge\nmodule load singularity\n"


def test_a_missing_image_stops_the_job_with_one_line_before_any_step(tree, tmp_path):
    _, text = make(tree, "a100-cuda", site="jean-zay", launch="srun")
    ran = run_prelude(text, tmp_path, env={"SINGULARITY_ALLOWED_DIR": str(tmp_path / "allowed")})
    assert ran.returncode == 2
    assert ran.stderr == (
        f"error: no image at '{tmp_path}/allowed/a100-cuda.sif' (copy it into "
        f"{tmp_path}/allowed first: idrcontmgr cp a100-cuda.sif)\n"
    )


def test_a_job_shell_without_module_is_one_line(tree, tmp_path):
    _, text = make(tree, "a100-cuda", site="jean-zay", launch="srun")
    ran = run_prelude(text, tmp_path, module=False)
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1
    assert "has no 'module' command" in ran.stderr


@pytest.mark.parametrize("image", ["images/a100-cuda.sif", "/scratch/me/a100-cuda.sif"])
def test_an_image_outside_the_allowed_folder_is_refused_in_one_line(project, image):
    result = run_here(
        "jobscript",
        "a100-cuda",
        "--site",
        "jean-zay",
        "--image",
        image,
        "--",
        "train.py",
        env={"SINGULARITY_ALLOWED_DIR": "/gpfs/allowed"},
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"error: command line: --image {image}: jean-zay runs images only from "
        "$SINGULARITY_ALLOWED_DIR; copy it there (idrcontmgr cp IMAGE) and give "
        "--image '$SINGULARITY_ALLOWED_DIR/NAME.sif'\n"
    )
    # the folder as the login node names it is the same folder
    expanded = run_here(
        "jobscript",
        "a100-cuda",
        "--site",
        "jean-zay",
        "--image",
        "/gpfs/allowed/x.sif",
        "--",
        "train.py",
        env={"SINGULARITY_ALLOWED_DIR": "/gpfs/allowed"},
        cwd=project,
    )
    assert expanded.returncode == 0, expanded.stderr


def test_the_default_wrapper_is_this_installs_by_its_absolute_path(tree, tmp_path):
    """Problem 2: `singularity_wrapper` was on PATH only for a user who had loaded a module."""
    plan = jobscript.plan(tree, "cpu", Request(program=("train.py",)))
    assert plan.wrapper == WRAPPER
    text = jobscript.script(plan)
    assert f"{WRAPPER} exec torchrun" in launch_line(text)
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "cpu.sif").write_bytes(b"image")
    ran = run_prelude(text, tmp_path)
    assert ran.returncode == 0, ran.stderr
    missing = run_prelude(text.replace(WRAPPER, "/nowhere/singularity_wrapper"), tmp_path)
    assert missing.returncode == 2
    assert missing.stderr == (
        "error: /nowhere/singularity_wrapper not found (load the module that provides "
        "it, or give jobscript --wrapper)\n"
    )


def published_record(folder, **fields):
    version = folder / "pytorch" / "2.9-cpu"
    version.mkdir(parents=True)
    record = {"name": "pytorch", "version": "2.9-cpu", "target": "cpu", "site": "local", **fields}
    (version / "publish.json").write_text(json.dumps(record))
    return version


def test_a_published_version_is_loaded_by_the_script(tree, tmp_path):
    version = published_record(tmp_path / "prefix")
    plan, text = make(tree, "cpu", published=str(version), wrapper="")
    assert plan.wrapper == "singularity_wrapper"
    assert f"module use {tmp_path}/prefix/modulefiles\nmodule load pytorch/2.9-cpu\n" in text
    assert "SING_IMAGE=" not in text  # the module sets it
    assert "singularity_wrapper exec torchrun" in launch_line(text)
    assert "--published" in text.splitlines()[2]  # the command that wrote it


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"target": "a100-cuda", "site": "karolina"},
            "pytorch/2.9-cpu is a100-cuda for karolina; this script is cpu on local",
        ),
        ({"name": None}, "is not a publish record (publish.json with name, version, target and site)"),
    ],
)
def test_a_published_version_of_another_image_is_one_line(tmp_path, fields, message):
    version = published_record(tmp_path / "prefix", **fields)
    result = run_here("jobscript", "cpu", "--published", version, "--", "train.py")
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert message in result.stderr


def test_no_publish_record_is_one_line(tmp_path):
    result = run_here("jobscript", "cpu", "--published", tmp_path / "nothing", "--", "train.py")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "no publish record there; expected the folder PREFIX/NAME/VERSION" in result.stderr


def test_karolina_starts_mpi_ranks_with_the_hosts_mpirun_after_loading_it(tree):
    """Problem 5: Karolina's mpirun mode was srun --mpi=pmix, which no source confirms there."""
    plan, text = make(tree, "a100-cuda", site="karolina", nodes=2, launch="mpirun")
    assert "module load OpenMPI/5.0.3-GCC-13.3.0\n" in text and "module purge" not in text
    assert launch_line(text).startswith('mpirun -np "$SLURM_NTASKS" --map-by ppr:8:node ')
    # the other launch modes need no host MPI
    _, text = make(tree, "a100-cuda", site="karolina", nodes=2, launch="srun")
    assert not re.search(r"^module ", text, re.M) and "--mpi=" not in launch_line(text)


# --- issue 33: LUMI's rendezvous settings with their srun option; MIOpen's folders per job --

# HPE's shs-ccl-docs ccl_env.sh (2026-04); alt_read needs `srun --network=disable_rdzv_get`
HPE_RDZV = {
    "FI_CXI_RDZV_PROTO": "alt_read",
    "FI_CXI_RDZV_EAGER_SIZE": "0",
    "FI_CXI_RDZV_THRESHOLD": "0",
    "FI_CXI_RDZV_GET_MIN": "0",
}
NETWORK = "--network=disable_rdzv_get"


def srun_calls(text):
    """Every srun the script runs, from the word to the end of its line (comments left out)."""
    return [
        found.group(0)
        for line in text.splitlines()
        if not line.lstrip().startswith("#")
        for found in re.finditer(r"\bsrun\b.*", line)
    ]


def launch_block(text):
    """What the script runs after its checks: the lines after its last blank line."""
    return text[text.rindex("\n\n") + 2 :]


@pytest.mark.parametrize("launch", LAUNCHES)
def test_every_srun_of_a_lumi_multi_node_script_carries_the_option_hpes_rdzv_settings_need(tree, launch):
    _, text = make(tree, "lumi-rocm", nodes=2, launch=launch, stage=("/scratch/p/ds",))
    calls = srun_calls(text)
    assert len(calls) == 4, text  # MIOpen's folders made and removed, the unstage trap, the launch
    assert all(call.startswith(f"srun {NETWORK} ") for call in calls), calls
    assert (
        f"#   - srun {NETWORK} on every step: the site's multi-node settings need it (multi_node.srun_options)\n"
    ) in text
    # the settings that need it reach the ranks through the wrapper (HPCML_SITE=lumi) on jobs of
    # more than one node: the jobs whose scripts carry the option
    assert "export HPCML_SITE=lumi\n" in text
    lumi = tree.sites["lumi"]
    assert {name: value for name, value in lumi.multi_node.env if name.startswith("FI_CXI_RDZV_")} == HPE_RDZV
    assert not [name for name, _ in lumi.env if name.startswith("FI_CXI_RDZV_")]  # never baked into the image
    settings = (ROOT / "wrappers" / "sites" / "lumi.sh").read_text()
    multi_node_env = re.search(r"^HPCML_MULTI_NODE_ENV=\((.*)\)$", settings, re.M).group(1).split(" ")
    assert [f"{name}={value}" for name, value in HPE_RDZV.items()] == multi_node_env[-4:]


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_one_node_lumi_script_carries_no_srun_option_as_its_ranks_get_no_rdzv_settings(tree, launch):
    _, text = make(tree, "lumi-rocm", launch=launch)
    calls = srun_calls(text)
    assert len(calls) == 3 and "--network" not in text, text  # MIOpen's folders made and removed, the launch
    assert all(
        call.startswith(("srun --kill-on-bad-exit=1 ", 'srun --ntasks="$SLURM_JOB_NUM_NODES" ')) for call in calls
    )


def test_only_the_multi_node_scripts_of_a_site_that_asks_carry_srun_options(tree):
    """Every script of every site: each srun starts with the site's multi_node.srun_options on
    more than one node, with none on one node; sites without them (all but LUMI) are unchanged."""
    checked = set()
    for name, text in every_script(tree):
        _, site_name, _, nodes = name.rsplit(".", 3)
        site = tree.sites[site_name]
        options = site.multi_node.srun_options if nodes == "2" else ()
        if not options:
            assert "--network" not in text, name
        assert all(call.startswith(" ".join(["srun", *options]) + " ") for call in srun_calls(text)), name
        assert ("mkdir -p" in text) == bool(site.scratch.make_dirs), name
        checked.add((bool(options), bool(site.scratch.make_dirs)))
    assert checked == {(True, True), (False, True), (False, False)}


def test_the_hosts_mpirun_across_nodes_is_refused_where_every_step_needs_an_srun_option(tmp_path):
    """The host's mpirun starts ranks without srun's options, while the wrapper would still set
    the multi-node settings that need them: one line instead of a script that mixes the two."""
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    karolina = recipes / "sites" / "karolina.yaml"
    karolina.write_text(karolina.read_text() + f"multi_node:\n  srun_options: [{NETWORK}]\n")
    tree = RecipeTree(recipes)
    with pytest.raises(RecipeError) as raised:
        make(tree, "a100-cuda", site="karolina", nodes=2, launch="mpirun")
    assert str(raised.value) == (
        f"command line: --launch mpirun on 2 nodes: the host's mpirun starts the ranks without srun {NETWORK}, "
        "which karolina's multi-node jobs need (multi_node.srun_options); use --launch srun"
    )
    assert launch_line(make(tree, "a100-cuda", site="karolina", launch="mpirun")[1]).startswith("mpirun ")
    assert launch_line(make(tree, "a100-cuda", site="karolina", nodes=2, launch="srun")[1]).startswith(
        f"srun {NETWORK} --kill-on-bad-exit=1 "
    )


def run_launch_block(text, tmp_path, **env):
    """The script's launch lines in bash -euo pipefail, with srun and scontrol that record
    what they were asked: the srun calls in the order the job would make them, and the
    variables each step hands the container (APPTAINERENV_*, SINGULARITYENV_*)."""
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "launch.sh"
    script.write_text(launch_block(text))
    fakes = (
        'srun() { echo "srun $*"; env | grep -E "^(APPTAINER|SINGULARITY)ENV_" | sort | sed "s/^/  /"; } >> "$CALLS"; '
        'scontrol() { echo n1; }; export -f srun scontrol; exec bash -euo pipefail "$0"'
    )
    calls = tmp_path / "calls"
    ran = subprocess.run(
        ["bash", "-c", fakes, str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        env={
            "PATH": "/usr/bin:/bin",
            "CALLS": str(calls),
            "SLURM_JOB_NUM_NODES": "2",
            "SLURM_JOB_NODELIST": "n[1-2]",
            **env,
        },
    )
    assert ran.returncode == 0, ran.stderr
    return calls.read_text()


def test_lumi_scripts_make_miopens_per_job_folders_on_every_node_and_hand_them_to_the_container(tree, tmp_path):
    """MIOpen's SQLite caches fail on Lustre (node-local /tmp), and ranks that each made the
    folders raced (LUMI-AI-Guide PR #108): one task a node makes them first, one pair per job.
    The image cannot name them per job (the runtime evaluates its environment without the
    host's variables: tests/wrappers/test_wrapper.py), so the script hands the container the
    values it expands."""
    lumi = tree.sites["lumi"]
    assert lumi.dirs_to_make == (
        ("MIOPEN_USER_DB_PATH", "/tmp/${USER}-${SLURM_JOB_ID:-nojob}-miopen-db"),
        ("MIOPEN_CUSTOM_CACHE_DIR", "/tmp/${USER}-${SLURM_JOB_ID:-nojob}-miopen-cache"),
    )
    folders = "/tmp/alice-4242-miopen-db /tmp/alice-4242-miopen-cache"
    handed = "".join(
        f"  {runtime}ENV_{name}=/tmp/alice-4242-{kind}\n"
        for runtime in ("APPTAINER", "SINGULARITY")
        for name, kind in (("MIOPEN_CUSTOM_CACHE_DIR", "miopen-cache"), ("MIOPEN_USER_DB_PATH", "miopen-db"))
    )
    for nodes, launch in itertools.product((1, 2), LAUNCHES):
        _, text = make(tree, "lumi-rocm", nodes=nodes, launch=launch)
        option = f"{NETWORK} " if nodes > 1 else ""
        calls = run_launch_block(text, tmp_path / f"{nodes}-{launch}", USER="alice", SLURM_JOB_ID="4242")
        made = f"srun {option}--ntasks=2 --ntasks-per-node=1 mkdir -p {folders}\n"
        assert calls.startswith(made + handed), calls
        launched = calls[len(made + handed) :]
        assert launched.startswith(f"srun {option}--kill-on-bad-exit=1 ") and launched.endswith("\n" + handed), calls
        assert (
            "#   - MIOPEN_USER_DB_PATH, MIOPEN_CUSTOM_CACHE_DIR (scratch.make_dirs): made on every node before "
            "the ranks start, so that no two ranks race to make them, and removed when the script ends\n"
        ) in text
    # set -u does not stop a job whose shell has no USER
    calls = run_launch_block(text, tmp_path / "no-user", SLURM_JOB_ID="7")
    assert calls.startswith(
        f"srun {NETWORK} --ntasks=2 --ntasks-per-node=1 mkdir -p /tmp/-7-miopen-db /tmp/-7-miopen-cache\n"
    )


def test_nccl_net_gdr_level_is_never_set(tree):
    """LAIF issue #30: PHB or SYS hangs ROCm 7 images, and ROCm's default is right. No site
    sets it, nor any job script, the wrapper, its site settings or a rendered image."""
    for site in tree.sites.values():
        assert "NCCL_NET_GDR_LEVEL" not in dict((*site.env, *site.multi_node.env)), site.name
    texts = dict(every_script(tree))
    for path in [
        ROOT / "wrappers" / "singularity_wrapper",
        *(ROOT / "wrappers" / "sites").glob("*.sh"),
        *(ROOT / "containers").glob("*.def"),
    ]:
        texts[str(path.relative_to(ROOT))] = path.read_text()
    assert len(texts) > 60 and any(name.startswith("containers/") for name in texts)
    assert [name for name, text in texts.items() if "NCCL_NET_GDR_LEVEL" in text] == []


# --- Roihu's GPU partition: partitions by GPUs per job (CSC's user guide, 2026-08-21) -------

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
    assert f"export OMP_NUM_THREADS={plan.cores_per_rank}" in text and plan.cores_per_rank == 72


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
    assert plan.notes == [
        "--nvme-pool needs --exclusive on roihu: the job is billed for all 4 GPUs of each node, not the 1 it uses"
    ]


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


# --- the local site's scripts under the real Slurm cluster, with the CPU image -------------

# The local site's scripts under sbatch, unchanged, on one node and two: tests/cluster/test_site_twins.py
# (the local twin and every other site's).
