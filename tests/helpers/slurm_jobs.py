"""Submitting jobs to the test clusters and waiting for them, bounded in time."""

import os
import shutil
import subprocess
import time

import pytest
from conftest import ROOT

WRAPPER = str(ROOT / "wrappers" / "singularity_wrapper")
# A short smoke run for job scripts: every check, small sizes, few iterations
QUICK = ("-m", "smoke", "all", "--sizes", "8:1M", "--warmup", "2", "--iters", "5")
# torch's c10d when a peer's address has no name on the node (issue 30): must never be printed
C10D_NO_NAME = "The hostname of the client socket cannot be retrieved"
NEEDS_TWO_NODES = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("slurmd"),
    reason="namespaces, a bridge and slurmd need root and Debian's slurm-wlm",
)


def job_env(two_nodes, site_file, apptainer):
    # root runs these tests; Open MPI refuses root unless told twice
    env = dict(
        two_nodes.env,
        HPCML_APPTAINER=apptainer,
        HPCML_SITE_FILE=str(site_file),
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
    )
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH"):
        env.pop(name, None)
    return env


DONE = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}


def run_batch(script, env, cwd, log, timeout=300):
    """(state, exit code, the log's text) of ``script`` submitted with sbatch and waited for."""
    submitted = subprocess.run(
        ["sbatch", "--parsable", f"--output={log}", str(script)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr
    state = wait_for(submitted.stdout.strip().split(";")[0], env, timeout=timeout)
    return (*state, log.read_text() if log.exists() else "")


def wait_for(job, env, timeout=600):
    """(state, exit code) once the job ends; polled (sbatch --wait sleeps ever longer between
    its checks, which blurs the timings), and cancelled if it runs past the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = subprocess.run(
            ["scontrol", "-o", "show", "job", job], env=env, capture_output=True, text=True, timeout=30
        ).stdout
        fields = dict(field.split("=", 1) for field in shown.split() if "=" in field)
        if fields.get("JobState") in DONE:
            return fields["JobState"], fields.get("ExitCode")
        time.sleep(0.5)
    subprocess.run(["scancel", "--full", job], env=env, timeout=30)
    pytest.fail(f"job {job} still running after {timeout} s")
