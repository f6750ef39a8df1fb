"""runtime/launchenv.py on bad input, for real: each case runs `python -m launchenv` (and
`-- sh -c 'touch MARKER'`) in a fresh interpreter with a clean environment. Every one must stop
with exit status 2 and one line, `error: launchenv: ...`, naming what was wrong; no traceback,
no exports, and the command never starts."""

import os
import subprocess
import sys

import pytest
from conftest import ROOT
from helpers import representative

RUNTIME = ROOT / "runtime"
sys.path.insert(0, str(RUNTIME))
import launchenv  # noqa: E402

# Valid environments, each on one node (so no name is looked up); every case breaks one thing.
SLURM = {
    "SLURM_JOB_ID": "4567890",
    "SLURM_PROCID": "1",
    "SLURM_LOCALID": "1",
    "SLURM_NTASKS": "2",
    "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_STEP_TASKS_PER_NODE": "2",
    "SLURM_NODEID": "0",
    "SLURM_STEP_ID": "0",
    "SLURM_STEP_NODELIST": "localhost",
    "SLURM_JOB_NODELIST": "localhost",
}
OMPI = {
    "OMPI_COMM_WORLD_RANK": "0",
    "OMPI_COMM_WORLD_LOCAL_RANK": "0",
    "OMPI_COMM_WORLD_SIZE": "2",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    "OMPI_MCA_ess_base_jobid": "1888878593",
}
PMI = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
TORCHRUN = {
    "TORCHELASTIC_RUN_ID": "none",
    "RANK": "0",
    "LOCAL_RANK": "0",
    "WORLD_SIZE": "1",
    "LOCAL_WORLD_SIZE": "1",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29400",
}
BASES = {"slurm": SLURM, "openmpi": OMPI, "pmi": PMI, "torchrun": TORCHRUN}


def slurm(drop=(), **changes):
    return {**{k: v for k, v in SLURM.items() if k not in drop}, **changes}


# id: (environment, what the one line must contain)
CASES = {
    "procid-not-a-number": (slurm(SLURM_PROCID="x"), "SLURM_PROCID='x' is not a whole number"),
    "procid-superscript-digit": (slurm(SLURM_PROCID="\u00b2"), "SLURM_PROCID='\u00b2' is not a whole number"),
    "procid-double-minus": (slurm(SLURM_PROCID="--1"), "SLURM_PROCID='--1' is not a whole number"),
    "procid-control-characters": (
        slurm(SLURM_PROCID="1\r\x1b[2K\n"),
        "SLURM_PROCID='1\\r\\x1b[2K\\n' is not a whole number",
    ),
    "ntasks-not-a-number": (
        slurm(SLURM_NTASKS="four", drop=["SLURM_STEP_NUM_TASKS"]),
        "SLURM_NTASKS='four' is not a whole number",
    ),
    "ntasks-as-tasks-on-node": (
        slurm(SLURM_NTASKS="four", drop=["SLURM_STEP_TASKS_PER_NODE"]),
        "SLURM_NTASKS='four' is not a whole number",
    ),
    "ntasks-per-node-not-a-number": (
        slurm(SLURM_NTASKS_PER_NODE="x"),
        "SLURM_NTASKS_PER_NODE='x' is not a whole number",
    ),
    "job-id-not-a-number": (slurm(SLURM_JOB_ID="abc"), "SLURM_JOB_ID='abc' is not a whole number"),
    "job-id-negative": (slurm(SLURM_JOB_ID="-5"), "SLURM_JOB_ID=-5 is not a job id"),
    "step-id-not-a-number": (slurm(SLURM_STEP_ID="x1"), "SLURM_STEP_ID='x1' is not a step id"),
    "localid-not-a-number": (slurm(SLURM_LOCALID="one"), "SLURM_LOCALID='one' is not a whole number"),
    "nodeid-not-a-number": (slurm(SLURM_NODEID="first"), "SLURM_NODEID='first' is not a whole number"),
    "nodeid-negative": (slurm(SLURM_NODEID="-1"), "SLURM_NODEID=-1 is not a node number"),
    "tasks-per-node-garbage": (
        slurm(SLURM_STEP_TASKS_PER_NODE="2(x"),
        "SLURM_STEP_TASKS_PER_NODE='2(x' is not a list of task counts",
    ),
    "tasks-per-node-times-zero": (
        slurm(SLURM_STEP_TASKS_PER_NODE="2(x0)"),
        "SLURM_STEP_TASKS_PER_NODE='2(x0)' is not a list",
    ),
    "job-tasks-per-node-garbage": (
        slurm(SLURM_TASKS_PER_NODE="two", drop=["SLURM_STEP_TASKS_PER_NODE"]),
        "SLURM_TASKS_PER_NODE='two' is not a list of task counts",
    ),
    "nodelist-unclosed": (
        slurm(SLURM_JOB_NODELIST="n[1-", drop=["SLURM_STEP_NODELIST"]),
        "SLURM_JOB_NODELIST: bad hostlist 'n[1-': '[' without ']'",
    ),
    "nodelist-close-first": (
        slurm(SLURM_STEP_NODELIST="n]1"),
        "SLURM_STEP_NODELIST: bad hostlist 'n]1': ']' without '['",
    ),
    "nodelist-reversed-range": (
        slurm(SLURM_STEP_NODELIST="n[5-1]"),
        "SLURM_STEP_NODELIST: bad hostlist range '5-1' in 'n[5-1]'",
    ),
    "nodelist-letters-in-range": (slurm(SLURM_STEP_NODELIST="n[a-b]"), "bad hostlist range 'a-b'"),
    "nodelist-no-host": (slurm(SLURM_STEP_NODELIST=","), "SLURM_STEP_NODELIST=',' names no host"),
    "nodelist-billions-of-hosts": (slurm(SLURM_STEP_NODELIST="n[1-99999999999]"), "names more than 1000000 hosts"),
    "rank-not-below-world-size": (
        slurm(SLURM_PROCID="2"),
        "slurm: inconsistent ranks: SLURM_PROCID=2 is not a rank of SLURM_STEP_NUM_TASKS=2; expected 0 to 1",
    ),
    "rank-negative": (slurm(SLURM_PROCID="-1"), "SLURM_PROCID=-1 is not a rank of"),
    "world-size-zero": (dict(TORCHRUN, WORLD_SIZE="0"), "torchrun: inconsistent ranks: WORLD_SIZE=0"),
    "local-rank-past-this-node": (
        slurm(SLURM_LOCALID="2"),
        "SLURM_LOCALID=2 is not a rank on this node of 2 (from "
        "SLURM_STEP_TASKS_PER_NODE='2' on SLURM_NODEID=0); expected 0 to 1",
    ),
    "ompi-size-not-a-number": (
        dict(OMPI, OMPI_COMM_WORLD_SIZE="two"),
        "OMPI_COMM_WORLD_SIZE='two' is not a whole number",
    ),
    "ompi-local-rank-missing": (
        {k: v for k, v in OMPI.items() if k != "OMPI_COMM_WORLD_LOCAL_RANK"},
        "OMPI_COMM_WORLD_LOCAL_RANK is not set",
    ),
    "ompi-job-id-not-a-number": (
        dict(OMPI, OMPI_MCA_ess_base_jobid="j"),
        "OMPI_MCA_ess_base_jobid='j' is not a whole number",
    ),
    "pmi-rank-without-size": ({"PMI_RANK": "0"}, "PMI_SIZE is not set (needed with PMI_RANK)"),
    "pmi-local-rank-not-a-number": (dict(PMI, MPI_LOCALRANKID="a"), "MPI_LOCALRANKID='a' is not a whole number"),
    "pmi-local-size-not-a-number": (dict(PMI, MPI_LOCALNRANKS="b"), "MPI_LOCALNRANKS='b' is not a whole number"),
    "pmix-rank-without-size": ({"PMIX_RANK": "0"}, "PMIX_RANK is set but no world size"),
    "deepspeed-local-size-not-a-number": (
        {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_SIZE": "x"},
        "LOCAL_SIZE='x' is not a whole number",
    ),
    "master-port-too-high": (slurm(MASTER_PORT="70000"), "MASTER_PORT='70000' is not a port number"),
    "master-port-not-a-number": (slurm(MASTER_PORT="abc"), "MASTER_PORT='abc' is not a port number"),
    "port-base-not-a-number": (slurm(HPCML_MASTER_PORT_BASE="x"), "HPCML_MASTER_PORT_BASE='x' is not a whole number"),
    "port-base-too-high": (
        slurm(HPCML_MASTER_PORT_BASE="60000"),
        "HPCML_MASTER_PORT_BASE=60000 gives port 78900 for SLURM_JOB_ID=4567890",
    ),
    "master-addr-not-a-host-name": (
        slurm(SLURM_STEP_TASKS_PER_NODE="1(x2)", SLURM_LOCALID="0", MASTER_ADDR="a..b"),
        "MASTER_ADDR='a..b' is not a host name",
    ),
}


def launch(tmp_path, env, *args):
    """`python -m launchenv ARGS` in ``tmp_path`` with only ``env`` (and a PATH) set."""
    clean = {"PATH": os.environ.get("PATH", os.defpath), "PYTHONPATH": str(RUNTIME), **env}
    return subprocess.run(
        [sys.executable, "-m", "launchenv", *args], cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=60
    )


COMMAND = ["--", "sh", "-c", "touch MARKER"]


@pytest.mark.parametrize("base", BASES.values(), ids=BASES.keys())
def test_the_unbroken_environments_run_the_command(tmp_path, base):
    # so that each case below fails for the one thing it breaks
    result = launch(tmp_path, base, *COMMAND)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert (tmp_path / "MARKER").exists()


# one case of each launcher's environment, and the one whose value must be shown escaped: the
# others take the same path out (`make test` runs them all; the library test below, each case)
FRESH = ("procid-control-characters", "ompi-local-rank-missing", "pmi-rank-without-size", "world-size-zero")


@pytest.mark.parametrize("mode", ["command", "exports"])
@pytest.mark.parametrize("env, expected", representative.cases(CASES, keep=FRESH))
def test_bad_input_stops_in_one_line_before_the_command(tmp_path, env, expected, mode):
    result = launch(tmp_path, env, *(COMMAND if mode == "command" else []))
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: launchenv: ") and expected in lines[0], lines[0]
    assert result.stdout == ""  # no half set of exports
    assert not (tmp_path / "MARKER").exists()


@pytest.mark.parametrize("env, expected", CASES.values(), ids=CASES.keys())
def test_the_library_raises_launch_error_for_the_same(env, expected):
    with pytest.raises(launchenv.LaunchError) as raised:
        launchenv.check_master_resolves(launchenv.detect(env))
    assert expected in str(raised.value)


def test_named_steps_count_as_step_zero():
    assert {
        launchenv.detect(dict(SLURM, SLURM_STEP_ID=step)).master_port
        for step in ("0", "batch", "extern", "interactive")
    } == {10000 + 4567890 % 2000 * 10}


def test_an_unexpected_argument_is_refused(tmp_path):
    result = launch(tmp_path, SLURM, "sh", "-c", "touch MARKER")
    assert result.returncode == 2 and result.stderr.startswith("error: launchenv: unexpected argument 'sh'")
    assert not (tmp_path / "MARKER").exists()


@pytest.mark.parametrize("command, status", [("no-such-command-hpcml", 127), (".", 126)])
def test_a_command_that_cannot_start_is_one_line(tmp_path, command, status):
    result = launch(tmp_path, SLURM, "--", command)
    assert result.returncode == status
    assert result.stderr.startswith(f"error: launchenv: cannot run {command!r}: ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
