"""The smoke suite inside the real CPU image: `python -m builder smoke` (what `make smoke`
runs), the four launch modes CI proves (torchrun, srun, host mpirun, the DeepSpeed launcher)
and the failure modes, each ending with a diagnosis inside its timeout."""

import json
import os
import re
import socket
import subprocess
import time

import pytest
from conftest import ROOT, run_builder

WRAPPER = str(ROOT / "wrappers" / "singularity_wrapper")
QUICK = ["--sizes", "8:1M", "--warmup", "2", "--iters", "5"]


@pytest.fixture
def env(apptainer, cpu_image):
    env = dict(os.environ, SING_IMAGE=str(cpu_image), HPCML_APPTAINER=apptainer, HPCML_SITE="local")
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH"):
        env.pop(name, None)
    return env


def _report(folder):
    return json.loads((folder / "smoke.json").read_text())


def test_builder_smoke_prints_the_table_and_verdicts_and_writes_json_and_plot(cpu_image, apptainer, tmp_path):
    out = tmp_path / "report"
    result = run_builder(
        "smoke", "cpu", "--images", cpu_image.parent, "--out", out, env={"HPCML_APPTAINER": apptainer}, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert any(line.startswith("#        size        count      type") for line in lines)
    assert any(line.split()[:3] == ["67108864", "16777216", "float32"] for line in lines)
    for check in (
        "preflight torch",
        "preflight gpu",
        "allreduce sum",
        "allreduce busbw",
        "deepspeed ops",
        "deepspeed op loads",
        "deepspeed engine",
        "ddp",
    ):
        assert any(re.match(rf"{check} +PASS ", line) for line in lines), (check, result.stdout)
    report = _report(out)
    assert report["verdict"] == "pass"
    assert (report["machine"]["ranks"], report["machine"]["launcher"], report["machine"]["site"]) == (
        2,
        "torchrun",
        "local",
    )
    assert report["image"]["target"] == "cpu" and report["versions"]["torch"] == "2.13.0+cpu"
    assert report["checks"]["allreduce busbw"]["threshold"]["bytes"] == 67108864
    assert set(report["checks"]["deepspeed ops"]["installed"]) >= {"cpu_adam", "deepspeed_shm_comm", "fused_adam"}
    engine = report["checks"]["deepspeed engine"]
    assert [(run["stage"], run["optimizer"], run["offload"]) for run in engine["runs"]] == [
        (1, "Adam", False),
        (1, "AdamW", False),
        (2, "Adam", False),
        (2, "AdamW", False),
        (3, "Adam", False),
        (3, "AdamW", False),
        (3, "Adam", True),
        (3, "AdamW", True),
    ]
    assert all(run["learned"] for run in engine["runs"]) and "on all 2 ranks" in engine["why"]
    assert all(row["wrong"] == 0 for row in report["allreduce"])
    assert (out / "smoke-busbw.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Rank 0 speaks; the other rank stays quiet.
    assert result.stdout.count("allreduce sum") == 1
    assert report["checks"]["preflight torch"]["why"] == "torch 2.13.0+cpu, a cpu build as promised"


def test_builder_smoke_without_an_image_is_a_one_line_error(tmp_path):
    result = run_builder("smoke", "cpu", "--images", tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"error: {tmp_path / 'cpu.sif'}: no image; build it first with: make build TARGET=cpu\n"


def test_srun_two_tasks(slurm, env, tmp_path):
    result = subprocess.run(
        ["srun", "-n2", "--mpi=none", WRAPPER, "exec", "python", "-m", "smoke", "all", *QUICK, "--out", tmp_path],
        env=dict(env, SLURM_CONF=str(slurm.conf)),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = _report(tmp_path)
    assert (report["machine"]["launcher"], report["machine"]["ranks"]) == ("slurm", 2)
    assert report["checks"]["mpi4py"]["verdict"] == "none"  # local Slurm has no MPI plugin
    assert report["checks"]["ddp"]["verdict"] == "pass"


def test_host_mpirun_two_ranks_with_the_mpi4py_check(env, tmp_path):
    result = subprocess.run(
        [
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "2",
            WRAPPER,
            "exec",
            "python",
            "-m",
            "smoke",
            "all",
            *QUICK,
            "--out",
            tmp_path,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = _report(tmp_path)
    assert (report["machine"]["launcher"], report["machine"]["ranks"]) == ("openmpi", 2)
    assert report["checks"]["mpi4py"] == {"verdict": "pass", "why": "MPI all-reduce over 2 ranks gave 3, expected 3"}


def test_the_deepspeed_launcher_on_one_node(env, tmp_path):
    result = subprocess.run(
        [WRAPPER, "exec", "deepspeed", "--num_gpus", "2", "--module", "smoke", "all", *QUICK, "--out", tmp_path],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = _report(tmp_path)
    assert (report["machine"]["launcher"], report["machine"]["ranks"]) == ("env", 2)
    assert report["verdict"] == "pass"


# --- failure modes: real ranks, real sockets; each must end inside its limit ------------------


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _rank(env, rank, argv, master="127.0.0.1", port=None):
    rank_env = dict(
        env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR=master, MASTER_PORT=str(port or 29500)
    )
    return subprocess.Popen(
        [WRAPPER, "exec", *argv], env=rank_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _smoke(out, *extra):
    return ["python", "-m", "smoke", "allreduce", *QUICK, "--out", str(out), *extra]


def _finish(process, limit):
    started = time.monotonic()
    stdout, stderr = process.communicate(timeout=limit)
    return process.returncode, stdout + stderr, time.monotonic() - started


def test_a_rank_that_exits_early_is_named_as_the_cause(env, tmp_path):
    port = _free_port()
    leaver = _rank(
        env,
        1,
        [
            "python",
            "-c",
            "import launchenv, torch.distributed as dist; launchenv.apply(); "
            "dist.init_process_group('gloo'); dist.destroy_process_group()",
        ],
        port=port,
    )
    smoke = _rank(env, 0, _smoke(tmp_path, "--op-timeout", "30", "--timeout", "90"), port=port)
    status, output, seconds = _finish(smoke, 120)
    assert _finish(leaver, 60)[0] == 0
    assert status == 1, output
    # the leaver named by its address and host where the error gives one (gloo: "closed by peer [addr]:port")
    assert "smoke: rank 0 of 2" in output and re.search(
        r"likely cause: (another rank|the rank\(s\) at 127\.0\.0\.1 \([\w.-]+\)) died or exited early", output
    ), output
    report = _report(tmp_path)
    assert report["verdict"] == "fail" and "exited early" in report["checks"]["error"]["why"]


def test_a_taken_port_is_named_by_rank_0_and_rank_1_gives_up_in_time(env, tmp_path):
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("", 0))
        holder.listen()
        port = holder.getsockname()[1]
        first = _rank(env, 0, _smoke(tmp_path / "r0", "--op-timeout", "10", "--timeout", "40"), port=port)
        second = _rank(env, 1, _smoke(tmp_path / "r1", "--op-timeout", "10", "--timeout", "40"), port=port)
        status0, output0, _ = _finish(first, 90)
        status1, output1, _ = _finish(second, 90)
    assert status0 == 1 and f"MASTER_PORT {port} is in use" in output0, output0
    assert "likely cause: MASTER_PORT is already in use" in output0
    assert status1 in (1, 3) and "smoke: rank 1 of 2" in output1, output1[-3000:]
    assert f"joining the gloo process group at 127.0.0.1:{port}" in output1


def test_an_unresolvable_master_address_fails_at_once(env, tmp_path):
    processes = [
        _rank(env, rank, _smoke(tmp_path / str(rank), "--timeout", "60"), master="no-such-host.invalid")
        for rank in (0, 1)
    ]
    for rank, process in enumerate(processes):
        status, output, seconds = _finish(process, 90)
        assert status == 1, output
        assert f"rank {rank} of 2" in output and "MASTER_ADDR 'no-such-host.invalid' does not resolve" in output
        assert "likely cause: the master address does not resolve" in output


def test_a_stuck_rank_ends_in_the_collective_timeout(env, tmp_path):
    port = _free_port()
    stuck = _rank(
        env,
        1,
        [
            "python",
            "-c",
            "import time, launchenv, torch.distributed as dist; "
            "launchenv.apply(); dist.init_process_group('gloo'); time.sleep(600)",
        ],
        port=port,
    )
    try:
        smoke = _rank(env, 0, _smoke(tmp_path, "--op-timeout", "10", "--timeout", "90"), port=port)
        status, output, seconds = _finish(smoke, 120)
    finally:
        stuck.kill()
        stuck.communicate()
    assert status == 1, output
    assert "smoke: rank 0 of 2" in output and "likely cause: a rank is stuck" in output, output[-3000:]


def test_a_rank_stuck_before_a_new_groups_first_all_reduce_is_named_with_the_group(env, tmp_path):
    """The hang of laifs-container-recipes issue 44, played by a rank that joins, creates the
    first new group as every rank must, and never all-reduces on it."""
    port = _free_port()
    stuck = _rank(
        env,
        1,
        [
            "python",
            "-c",
            "import time, socket, launchenv, torch.distributed as dist; launchenv.apply(); "
            "dist.init_process_group('gloo'); names = [None, None]; "
            "dist.all_gather_object(names, socket.gethostname().split('.')[0]); "
            "ranks = [None, None]; dist.all_gather_object(ranks, 1); dist.new_group([0, 1]); time.sleep(600)",
        ],
        port=port,
    )
    try:
        argv = ["python", "-m", "smoke", "groups", "--out", str(tmp_path), "--op-timeout", "10", "--timeout", "90"]
        status, output, seconds = _finish(_rank(env, 0, argv, port=port), 120)
    finally:
        stuck.kill()
        stuck.communicate()
    assert status == 1, output
    assert "smoke: rank 0 of 2" in output and "while the first all-reduce on new group 1 of all 2 ranks" in output
    assert "likely cause: a rank is stuck" in output, output[-3000:]


def test_the_whole_run_timeout_stops_a_rank_waiting_for_others(env, tmp_path):
    alone = _rank(env, 0, _smoke(tmp_path, "--op-timeout", "300", "--timeout", "15"), port=_free_port())
    status, output, seconds = _finish(alone, 90)
    assert status == 3, output
    assert "timed out after 15 s while joining the gloo process group" in output
    assert "likely cause: this rank could not join" in output


def test_an_op_missing_from_the_wheel_fails_the_deepspeed_check_and_is_named(apptainer, cpu_image, tmp_path):
    """Mark the shared-memory comm op as not installed (as in the image of issue 11): DeepSpeed
    then tries to compile it at engine start, and the check must fail naming it, not build it."""
    where = subprocess.run(
        [
            apptainer,
            "exec",
            cpu_image,
            "python",
            "-c",
            "import deepspeed.git_version_info_installed as m; print(m.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.strip()
    original = subprocess.run(
        [apptainer, "exec", cpu_image, "cat", where], capture_output=True, text=True, timeout=60
    ).stdout
    changed, count = re.subn(r"'deepspeed_shm_comm': \w+", "'deepspeed_shm_comm': False", original)
    assert count == 1, original
    fake = tmp_path / "git_version_info_installed.py"
    fake.write_text(changed)
    result = subprocess.run(
        [
            apptainer,
            "exec",
            "--bind",
            f"{fake}:{where}",
            cpu_image,
            "python",
            "-m",
            "smoke",
            "deepspeed",
            "--timeout",
            "300",
            "--out",
            tmp_path / "out",
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    checks = _report(tmp_path / "out")["checks"]
    assert checks["deepspeed ops"]["missing"] == ["deepspeed_shm_comm"]
    assert checks["deepspeed engine"]["verdict"] == "fail"
    assert "compile the deepspeed_shm_comm op at run time" in checks["deepspeed engine"]["why"]
    assert "compile the deepspeed_shm_comm op" in checks["deepspeed op loads"]["why"]
    assert "Error building extension" not in result.stdout + result.stderr


def test_ddp_at_eight_ranks_resumes_to_the_run_that_never_stopped(env, tmp_path):
    """Found by the Jean Zay twins: at 8 ranks this short momentum run's loss rises in the epoch
    after the checkpoint (1.79 -> 3.50), stopped or not; the check compares with the run that
    never stopped, not with the epoch before."""
    result = subprocess.run(
        [WRAPPER, "exec", "torchrun", "--standalone", "--nproc-per-node=8", "-m", "smoke", "ddp", "--out", tmp_path],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    ddp = _report(tmp_path)["checks"]["ddp"]
    assert ddp["verdict"] == "pass" and ddp["losses"][-1] > ddp["losses"][-2] * 1.05, ddp
    assert abs(ddp["losses"][-1] - ddp["continued"]) < 1e-6, ddp


def test_a_checkpoint_that_loses_the_optimizer_state_fails_the_ddp_check(env, tmp_path):
    """The resumed momentum must be the saved one: with the optimizer's state dropped on load,
    the epoch after the resume differs from the run that never stopped, and the check says so."""
    runner = tmp_path / "forgetful.py"
    runner.write_text(
        "import os, torch\n"
        "torch.optim.Optimizer.load_state_dict = lambda self, state: None\n"
        "from smoke import cli\n"
        "os._exit(cli.main())\n"
    )
    result = subprocess.run(
        [
            WRAPPER,
            "exec",
            "torchrun",
            "--standalone",
            "--nproc-per-node=2",
            str(runner),
            "ddp",
            "--out",
            tmp_path / "out",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode != 0, result.stdout[-2000:] + result.stderr[-3000:]
    ddp = _report(tmp_path / "out")["checks"]["ddp"]
    assert ddp["verdict"] == "fail" and "the checkpoint did not carry the whole state" in ddp["why"], ddp
