"""`builder jobscript` (builder/run/jobscript.py): what it chooses per site, size and launch mode
(table-driven, from the site files), each launch mode's line, and that every script it writes
passes bash -n and shellcheck. Its parts have their own files: where the job goes
(test_jobscript_placement.py), what the script sets up before it launches
(test_jobscript_environment.py), the paths and the program it names (test_jobscript_paths.py),
and Roihu's partitions and NVMe pool (test_jobscript_roihu.py)."""

import dataclasses
import shutil
import subprocess
import types

import pytest
from helpers.cli_here import run_here
from helpers.job_scripts import every_script, launch_line, make, sbatch_lines

from builder.errors import RecipeError
from builder.run import job_environment, job_launch, job_paths, job_placement, jobscript
from builder.run.jobscript import Request

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
    assert f"export OMP_NUM_THREADS={plan.placement.cores_per_rank}" in text
    assert f"export HPCML_SITE={plan.site.name}" in text


def test_deepspeed_across_nodes_says_it_is_the_srun_launch(tree):
    """The job script and the summary name what runs: srun's line and launchenv's variables,
    neither DeepSpeed's launcher nor its MPI discovery (test_two_nodes runs both)."""
    ds_plan, ds_text = make(tree, "cpu", nodes=2, tasks_per_node=2, launch="deepspeed")
    srun_plan, srun_text = make(tree, "cpu", nodes=2, tasks_per_node=2, launch="srun")
    assert launch_line(ds_text) == launch_line(srun_text)
    lines = ds_text.rstrip("\n").splitlines()
    assert lines[-5:-1] == list(job_launch.DEEPSPEED_ACROSS_NODES)
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


def test_the_plan_is_frozen_and_adds_up_its_passes_in_order(tree, monkeypatch):
    """Each pass's record as it stands alone, put together in the passes' order: the reasons,
    the notes, the #SBATCH options (the pool's in front of --time) and the script's last lines."""
    monkeypatch.setenv("USER", "alice")
    site = tree.sites["roihu"]
    plan, _ = make(
        tree, "gh200-cuda", nodes=2, gpus=1, launch="srun", nvme_pool="20G", stage=("d",), program=("python", "t.py")
    )
    request = plan.request
    placement = job_placement.placement_for(site, plan.target, request, "srun")
    environment = job_environment.environment_for(site, plan.target, request, "srun")
    storage = job_environment.storage_for(site, request, 1)
    steps = job_environment.steps_for(site, 2, "srun")
    paths = job_paths.paths_for(request)
    launched = job_launch.launch_for(site, request, "srun", placement, steps, environment.wrapper, paths.program)
    assert (plan.placement, plan.environment, plan.paths) == (placement, environment, paths)
    assert plan.why == placement.why + environment.why + storage.why + steps.why + launched.why
    assert plan.notes == storage.notes + paths.notes and len(plan.notes) == 2
    assert [option for option, _ in plan.sbatch][-4:] == ["exclusive", "bb", "time", "open-mode"]
    assert plan.launch_lines == steps.lines + launched.lines
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.why = ()


def test_a_time_from_the_site_is_said_first(tree):
    """The one reason no pass gives: the request's time was the site's (slurm.time)."""
    local = tree.sites["local"]
    timed = dataclasses.replace(local, slurm=dataclasses.replace(local.slurm, time="2:00:00"))
    target = dataclasses.replace(tree.target("cpu"), sites=(timed,))
    one_target = types.SimpleNamespace(target=lambda name: target)  # the tree, as plan reads it
    plan = jobscript.plan(one_target, "cpu", Request(program=("t.py",), wrapper="w"))
    assert plan.request.time == "2:00:00" and ("time", "2:00:00") in plan.sbatch
    assert plan.why == ("time 2:00:00: the site's default (slurm.time)", *plan.placement.why, *plan.why[-2:])
    assert "time" not in " ".join(
        jobscript.plan(one_target, "cpu", Request(program=("t.py",), wrapper="w", time="30")).why
    )


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


# --- the local site's scripts under the real Slurm cluster, with the CPU image -------------

# The local site's scripts under sbatch, unchanged, on one node and two: tests/cluster/test_site_twins.py
# (the local twin and every other site's).
