"""Every example (examples/) with one rank and with two, in the CPU image under torchrun, held
to NCCL's device rule (tests/helpers/device_rule): a tensor handed to a collective, or mixed
into an operation, that would be on the CPU on a GPU node fails the run here as it would
there. One rank is a real case (a GPU job on one GPU): each one-rank run is followed by a
second that must resume from the first's checkpoint. The two-node runs are in
tests/cluster/test_examples.py and test_frameworks.py.

The rule itself is checked first, on the code that broke `ds_zero.py` on a GPU (issue 46): the
old stop check all-reduced a flag made on the CPU."""

import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from helpers.slurm_jobs import WRAPPER

RULE = ROOT / "tests" / "helpers" / "device_rule"

# (id, arguments, the option a second run raises and to what, what the second run says)
ONE_RANK = [
    ("ddp_cnn", ("ddp_cnn.py", "--epochs", "2", "--samples", "1024", "--resume"), ("--epochs", "3"),
     r"resumed from checkpoints/last\.pt: epoch 3, step 0"),
    ("ds_zero", ("ds_zero.py", "--epochs", "2", "--samples", "1024", "--resume"), ("--epochs", "3"),
     r"resumed from \S*checkpoints-ds/epoch2-step0"),
    ("lightning_ddp", ("lightning_ddp.py", "--epochs", "2", "--samples", "1024", "--resume"), ("--epochs", "3"),
     r"resumed from \S*checkpoints-lightning/last\.ckpt: epoch 3"),
    ("hf_trainer", ("hf_trainer.py", "--steps", "10", "--save-every", "5", "--resume"), ("--steps", "15"),
     r"resumed from checkpoints-hf/checkpoint-10"),
    ("accelerate_loop", ("accelerate_loop.py", "--steps", "10", "--save-every", "5", "--resume"), ("--steps", "15"),
     r"resumed from checkpoints-accelerate/step-10: step 10"),
    ("hf_trainer-deepspeed", ("hf_trainer.py", "--steps", "10", "--save-every", "5", "--resume", "--deepspeed",
     "examples/ds_config_hf.json"), ("--steps", "15"), r"resumed from checkpoints-hf/checkpoint-10"),
    ("accelerate_loop-zero2", ("accelerate_loop.py", "--steps", "10", "--save-every", "5", "--resume", "--zero-stage",
     "2"), ("--steps", "15"), r"resumed from checkpoints-accelerate/step-10: step 10"),
]  # fmt: skip
# make test runs each script once with one rank; make test-full adds its DeepSpeed variant
ONE_RANK_FULL = ("hf_trainer-deepspeed", "accelerate_loop-zero2")
# (id, arguments, what rank 0 says first): two ranks on one machine
TWO_RANKS = [
    ("ddp_cnn", ("ddp_cnn.py", "--epochs", "2", "--samples", "1024"), "ddp_cnn: 2 rank(s)"),
    ("ds_zero", ("ds_zero.py", "--epochs", "2", "--samples", "1024"), "ds_zero: 2 rank(s)"),
    ("lightning_ddp", ("lightning_ddp.py", "--epochs", "2", "--samples", "1024"), "lightning_ddp: world 2"),
    ("hf_trainer", ("hf_trainer.py", "--steps", "10", "--save-every", "5"), "hf_trainer: world 2"),
    ("accelerate_loop", ("accelerate_loop.py", "--steps", "10", "--save-every", "5"), "accelerate_loop: world 2"),
]
TWO_RANKS_FULL = ("hf_trainer", "accelerate_loop")


def project(folder):
    """A user's project folder: the examples and the device rule copied in (the container
    sees the folder, which /tmp holds, and nothing of the checkout)."""
    folder.mkdir(parents=True)
    shutil.copytree(ROOT / "examples", folder / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(RULE, folder / ".device_rule", ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def held_to_the_rule(folder, cpu_image, apptainer):
    env = dict(
        os.environ,
        SING_IMAGE=str(cpu_image),
        HPCML_APPTAINER=apptainer,
        HPCML_SITE="local",
        PYTHONPATH=str(folder / ".device_rule"),
        RULE_WATCH=str(folder / "examples"),
        OMP_NUM_THREADS="1",
    )
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return env


def torchrun(folder, env, ranks, *args, timeout=300):
    command = [WRAPPER, "exec", "torchrun", "--standalone", "--nproc-per-node", str(ranks), *args]
    started = time.monotonic()
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    return result, time.monotonic() - started


def said(result):
    return (result.stdout + result.stderr)[-5000:]


# --- the rule ----------------------------------------------------------------------------------

PROBE = """
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
device = torch.device("cpu")
case = sys.argv[1]
if case == "cpu-flag":  # ds_zero's stop check before issue 46
    flag = torch.tensor([0])
    dist.all_reduce(flag)
elif case == "device-flag":
    flag = torch.tensor([0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
elif case == "mixed-sum":
    totals = torch.zeros(3, dtype=torch.float64, device=device)
    totals += torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
elif case == "computed":  # a loss computed from a model on the device, reduced
    model = torch.nn.Linear(4, 2).to(device)
    loss = model(torch.randn(3, 4).to(device)).sum().detach()
    dist.all_reduce(loss)
    names = [None]
    dist.all_gather_object(names, "host")
# left alive at exit, gloo's threads can abort the process (SIGABRT) after the last line
dist.destroy_process_group()
print("probe", case, "done")
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory, cpu_image, apptainer):
    folder = project(tmp_path_factory.mktemp("rule") / "project")
    (folder / "examples" / "probe.py").write_text(PROBE)
    env = held_to_the_rule(folder, cpu_image, apptainer)
    return lambda case: torchrun(folder, env, 1, "examples/probe.py", case, timeout=180)[0]


def test_the_rule_refuses_a_cpu_tensor_handed_to_a_collective_naming_the_line(probe):
    result = probe("cpu-flag")
    assert result.returncode != 0, said(result)
    assert re.search(
        r"device rule: \S*examples/probe\.py:8: torch\.distributed\.all_reduce got a \(1,\) torch\.int64 tensor "
        r"that is not on the training device",
        result.stderr,
    ), said(result)


def test_the_rule_refuses_an_operation_that_mixes_devices(probe):
    result = probe("mixed-sum")
    assert result.returncode != 0, said(result)
    assert re.search(r"device rule: \S*examples/probe\.py:14: \S+ mixes a tensor on the training device", result.stderr)


@pytest.mark.parametrize("case", ["device-flag", "computed"])
def test_the_rule_lets_tensors_on_the_training_device_through(probe, case):
    result = probe(case)
    assert result.returncode == 0 and f"probe {case} done" in result.stdout, said(result)


# --- the examples --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c[0], marks=(pytest.mark.full,) if c[0] in ONE_RANK_FULL else ()) for c in ONE_RANK]
)
def test_an_example_trains_with_one_rank_and_resumes(case, tmp_path, cpu_image, apptainer):
    name, args, more, resumed = case
    folder = project(tmp_path / name)
    env = held_to_the_rule(folder, cpu_image, apptainer)
    first, first_s = torchrun(folder, env, 1, f"examples/{args[0]}", *args[1:])
    assert first.returncode == 0, said(first)
    assert re.search(rf"^{args[0][:-3]}: (1 rank\(s\)|world 1) on ", first.stdout, re.M), said(first)
    second_args = list(args)
    second_args[second_args.index(more[0]) + 1] = more[1]
    second, second_s = torchrun(folder, env, 1, f"examples/{args[0]}", *second_args[1:])
    print(f"\n{name}, one rank: {first_s:.1f} s, resumed {second_s:.1f} s", file=sys.stderr)
    assert second.returncode == 0, said(second)
    assert re.search(resumed, second.stdout), said(second)


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c[0], marks=(pytest.mark.full,) if c[0] in TWO_RANKS_FULL else ()) for c in TWO_RANKS]
)
def test_an_example_trains_with_two_ranks_on_one_machine(case, tmp_path, cpu_image, apptainer):
    name, args, header = case
    folder = project(tmp_path / name)
    result, seconds = torchrun(
        folder, held_to_the_rule(folder, cpu_image, apptainer), 2, f"examples/{args[0]}", *args[1:]
    )
    print(f"\n{name}, two ranks: {seconds:.1f} s", file=sys.stderr)
    assert result.returncode == 0, said(result)
    assert header in result.stdout, said(result)
    assert "final parameters sha256" in result.stdout, said(result)
