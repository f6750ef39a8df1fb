"""The framework examples (examples/lightning_ddp.py, hf_trainer.py, accelerate_loop.py) trained
on the two-node cluster (tests/helpers/twonode_cluster.py) by the job scripts `builder jobscript --site
local --nodes 2` writes, one rank on each node, under each launch mode the examples are shown
with: the job finishes, the loss falls, and a second job with `--resume` goes on from the
checkpoint rank 0 wrote. The image must carry the frameworks at the versions
recipes/versions.yaml pins (HPCML_USER_BASE, which the wrapper puts on PYTHONPATH, can add them
to an image without). Without the cluster: each example's --help, in the image."""

import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml
from conftest import ROOT, run_builder
from helpers.slurm_jobs import NEEDS_TWO_NODES, WRAPPER, job_env, wait_for

EXAMPLES = ("lightning_ddp.py", "hf_trainer.py", "accelerate_loop.py")
LOSS = re.compile(r"^(first|last) loss ([0-9.]+)$", re.M)

# (id, launch mode, the first job's arguments (with --resume: no checkpoint yet), the option the
# second job raises, and to what, a pattern of what it says it resumed from (Lightning names the
# checkpoint by its absolute path), the line it ends on). 20 steps, or 2 epochs, then 10 more, or 1.
CASES = [
    (
        "lightning-srun",
        "srun",
        ("examples/lightning_ddp.py", "--epochs", "2", "--samples", "2048", "--resume"),
        ("--epochs", "3"),
        r"resumed from \S*/checkpoints-lightning/last\.ckpt: epoch 3\n",
        "epoch 3/3: loss",
    ),
    (
        "lightning-torchrun",
        "torchrun",
        ("examples/lightning_ddp.py", "--epochs", "2", "--samples", "2048", "--resume"),
        ("--epochs", "3"),
        r"resumed from \S*/checkpoints-lightning/last\.ckpt: epoch 3\n",
        "epoch 3/3: loss",
    ),
    (
        "hf-trainer-srun",
        "srun",
        ("examples/hf_trainer.py", "--steps", "20", "--save-every", "10", "--resume"),
        ("--steps", "30"),
        r"resumed from checkpoints-hf/checkpoint-20\n",
        "step 30/30: loss",
    ),
    (
        "hf-trainer-torchrun",
        "torchrun",
        ("examples/hf_trainer.py", "--steps", "20", "--save-every", "10", "--resume"),
        ("--steps", "30"),
        r"resumed from checkpoints-hf/checkpoint-20\n",
        "step 30/30: loss",
    ),
    (
        "hf-trainer-deepspeed-srun",
        "srun",
        (
            "examples/hf_trainer.py",
            "--steps",
            "20",
            "--save-every",
            "10",
            "--resume",
            "--deepspeed",
            "examples/ds_config_hf.json",
        ),
        ("--steps", "30"),
        r"resumed from checkpoints-hf/checkpoint-20\n",
        "step 30/30: loss",
    ),
    (
        "accelerate-srun",
        "srun",
        ("examples/accelerate_loop.py", "--steps", "20", "--save-every", "10", "--resume"),
        ("--steps", "30"),
        r"resumed from checkpoints-accelerate/step-20: step 20\n",
        "step 30/30: loss",
    ),
    (
        "accelerate-torchrun",
        "torchrun",
        ("examples/accelerate_loop.py", "--steps", "20", "--save-every", "10", "--resume"),
        ("--steps", "30"),
        r"resumed from checkpoints-accelerate/step-20: step 20\n",
        "step 30/30: loss",
    ),
    (
        "accelerate-deepspeed-srun",
        "srun",
        ("examples/accelerate_loop.py", "--steps", "20", "--save-every", "10", "--resume", "--zero-stage", "2"),
        ("--steps", "30"),
        r"resumed from checkpoints-accelerate/step-20: step 20\n",
        "step 30/30: loss",
    ),
]
# what each example says first, with the world and the hosts: "<name>: world 2 on n1, n2, cpu, <engine>"
ENGINES = {
    "lightning-srun": "SLURMEnvironment",
    "lightning-torchrun": "TorchElasticEnvironment",
    "hf-trainer-srun": "DDP",
    "hf-trainer-torchrun": "DDP",
    "hf-trainer-deepspeed-srun": "DeepSpeed ZeRO stage 2",
    "accelerate-srun": "DDP",
    "accelerate-torchrun": "DDP",
    "accelerate-deepspeed-srun": "DeepSpeed ZeRO stage 2",
}


def wrapper_env(cpu_image, apptainer):
    env = dict(os.environ, SING_IMAGE=str(cpu_image), HPCML_APPTAINER=apptainer, HPCML_SITE="local")
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH"):
        env.pop(name, None)
    return env


@pytest.mark.parametrize("example", EXAMPLES)
def test_each_framework_example_answers_help(example, cpu_image, apptainer):
    started = time.monotonic()
    result = subprocess.run(
        [WRAPPER, "exec", "python", f"examples/{example}", "--help"],
        cwd=ROOT,
        env=wrapper_env(cpu_image, apptainer),
        capture_output=True,
        text=True,
        timeout=120,
    )
    print(f"\n{example} --help: {time.monotonic() - started:.1f} s", file=sys.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith(f"usage: {example}"), result.stdout[:500]
    for option in ("--resume", "--config"):
        assert option in result.stdout, result.stdout


@pytest.fixture(scope="module")
def frameworks(cpu_image, apptainer):
    """The image (with HPCML_USER_BASE, if set, on its PYTHONPATH) imports each framework at
    the version recipes/versions.yaml pins."""
    pinned = yaml.safe_load((ROOT / "recipes" / "versions.yaml").read_text())["frameworks"]
    code = (
        "import importlib\n"
        f"for name in {sorted(pinned)!r}:\n"
        "    print(name, importlib.import_module(name).__version__)\n"
    )
    result = subprocess.run(
        [WRAPPER, "exec", "python", "-c", code],
        cwd=ROOT,
        env=wrapper_env(cpu_image, apptainer),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"the image lacks a framework: {result.stderr[-2000:]}"
    found = dict(line.split() for line in result.stdout.splitlines())
    assert found == {name: str(version) for name, version in pinned.items()}, found
    return found


@pytest.fixture(scope="module")
def env(two_nodes, site_file, apptainer):
    return job_env(two_nodes, site_file, apptainer)


def job_script(folder, cpu_image, launch, *command, name="job.sh"):
    """`builder jobscript` for 2 nodes x 1 rank, written into the project folder."""
    written = run_builder(
        "jobscript",
        "cpu",
        "--site",
        "local",
        "--nodes",
        "2",
        "--tasks-per-node",
        "1",
        "--launch",
        launch,
        "--time",
        "00:10:00",
        "--image",
        cpu_image,
        "--wrapper",
        WRAPPER,
        "--out",
        folder / name,
        "--",
        *command,
        cwd=folder,  # the program is the project's copy, named by its absolute path
    )
    assert written.returncode == 0, written.stderr
    return name


# make test trains each framework once, under both launchers between them (45 s a case);
# make test-full runs the other five.
REPRESENTATIVE = ("lightning-torchrun", "hf-trainer-deepspeed-srun", "accelerate-srun")


def run_job(folder, env, script, timeout=400):
    """(the log of a job that must complete, seconds from sbatch to its end)."""
    started = time.monotonic()
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--output=job-%j.log", script],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    state = wait_for(job, env, timeout=timeout)
    log = folder / f"job-{job}.log"
    text = log.read_text() if log.exists() else ""
    assert state == ("COMPLETED", "0:0"), text[-6000:]
    return text, time.monotonic() - started


def losses(text):
    found = dict(LOSS.findall(text))
    assert set(found) == {"first", "last"}, text[-3000:]
    return float(found["first"]), float(found["last"])


@NEEDS_TWO_NODES
@pytest.mark.parametrize(
    "case",
    [pytest.param(case, id=case[0], marks=() if case[0] in REPRESENTATIVE else pytest.mark.full) for case in CASES],
)
def test_a_framework_example_learns_on_two_nodes_and_resumes_from_rank_0s_checkpoint(
    case, frameworks, tmp_path, cpu_image, env
):
    name, launch, first_args, more, resumed, last_line = case
    folder = tmp_path / name
    folder.mkdir()
    shutil.copytree(ROOT / "examples", folder / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    first, first_s = run_job(folder, env, job_script(folder, cpu_image, launch, *first_args))
    header = f"{first_args[0].split('/')[1][:-3]}: world 2 on n1, n2, cpu, {ENGINES[name]}"
    assert header in first, first[-3000:]
    start, end = losses(first)
    assert end < 0.8 * start, (start, end)
    # the same job with more steps (or epochs): it goes on from where the first ended
    second_args = list(first_args)
    second_args[second_args.index(more[0]) + 1] = more[1]
    second, second_s = run_job(folder, env, job_script(folder, cpu_image, launch, *second_args, name="job2.sh"))
    print(f"\n{name}: first job {first_s:.1f} s, resumed job {second_s:.1f} s from sbatch", file=sys.stderr)
    assert re.search(resumed, second) and last_line in second, second[-3000:]
    assert header in second, second[-3000:]
    again, _ = losses(second)
    assert again < 0.8 * start, (start, again)  # went on learning: a fresh start is back at `start`
