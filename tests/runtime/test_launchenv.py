"""wrappers/launchenv.py: every launcher, its precedence, hostlists and ports."""

import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
import launchenv  # noqa: E402

SLURM = {
    "SLURM_JOB_ID": "4567890",
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
    "SLURM_NTASKS": "8",
    "SLURM_STEP_NUM_TASKS": "8",
    "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
    "SLURM_NODEID": "1",
    "SLURM_STEP_NODELIST": "nid[005-006]",
    "SLURM_JOB_NODELIST": "nid[005-006]",
}


@pytest.mark.parametrize(
    "expression, hosts",
    [
        ("nid[005-007,012],gpu-x1", ["nid005", "nid006", "nid007", "nid012", "gpu-x1"]),
        ("node7", ["node7"]),
        ("a[1-2]-b[08-09]", ["a1-b08", "a1-b09", "a2-b08", "a2-b09"]),
        ("x[9-11]", ["x9", "x10", "x11"]),
        ("c1,c2,d[3]", ["c1", "c2", "d3"]),
    ],
)
def test_hostlists_expand_like_scontrol_show_hostnames(expression, hosts):
    assert launchenv.expand_hostlist(expression) == hosts


@pytest.mark.parametrize("bad", ["nid[1-", "nid]1[", "nid[3-1]", "nid[a-b]"])
def test_bad_hostlists_are_reported(bad):
    with pytest.raises(launchenv.LaunchError):
        launchenv.expand_hostlist(bad)


def test_slurm_one_task_per_gpu():
    launch = launchenv.detect(SLURM)
    assert (launch.source, launch.rank, launch.local_rank, launch.world_size, launch.local_world_size) == (
        "slurm",
        5,
        1,
        8,
        4,
    )
    assert launch.master_addr == "nid005"
    assert launch.master_port == 10000 + 4567890 % 2000 * 10


def test_two_steps_of_one_allocation_get_different_ports():
    ports = {launchenv.detect(dict(SLURM, SLURM_STEP_ID=step)).master_port for step in ("0", "1", "2")}
    assert ports == {10000 + 1890 * 10, 10000 + 1890 * 10 + 1, 10000 + 1890 * 10 + 2}


def test_uneven_tasks_per_node_pick_this_nodes_count():
    env = dict(
        SLURM,
        SLURM_STEP_TASKS_PER_NODE="3(x2),2",
        SLURM_NODEID="2",
        SLURM_PROCID="6",
        SLURM_LOCALID="0",
        SLURM_STEP_NUM_TASKS="8",
    )
    assert launchenv.detect(env).local_world_size == 2


def test_torchrun_wins_over_the_slurm_step_around_it():
    env = dict(
        SLURM,
        TORCHELASTIC_RUN_ID="none",
        RANK="3",
        LOCAL_RANK="3",
        WORLD_SIZE="4",
        LOCAL_WORLD_SIZE="4",
        MASTER_ADDR="10.0.0.1",
        MASTER_PORT="29400",
    )
    launch = launchenv.detect(env)
    assert (launch.source, launch.rank, launch.world_size, launch.master_addr, launch.master_port) == (
        "torchrun",
        3,
        4,
        "10.0.0.1",
        29400,
    )


def test_the_deepspeed_launchers_variables_win_over_the_slurm_step_around_it():
    env = dict(
        SLURM,
        RANK="1",
        LOCAL_RANK="1",
        WORLD_SIZE="2",
        LOCAL_SIZE="2",
        CROSS_RANK="0",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT="29600",
    )
    launch = launchenv.detect(env)
    assert (
        launch.source,
        launch.rank,
        launch.local_rank,
        launch.world_size,
        launch.local_world_size,
        launch.master_port,
    ) == ("env", 1, 1, 2, 2, 29600)


def test_hand_started_ranks_without_a_local_size_are_all_on_one_node():
    launch = launchenv.detect({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "3"})
    assert (launch.source, launch.local_world_size, launch.master_addr) == ("env", 3, "127.0.0.1")


def test_open_mpi_inside_an_allocation_wins_over_slurm():
    env = dict(
        SLURM,
        OMPI_COMM_WORLD_RANK="2",
        OMPI_COMM_WORLD_LOCAL_RANK="0",
        OMPI_COMM_WORLD_SIZE="3",
        OMPI_COMM_WORLD_LOCAL_SIZE="1",
    )
    launch = launchenv.detect(env)
    assert (launch.source, launch.rank, launch.world_size, launch.master_addr) == ("openmpi", 2, 3, "nid005")


def test_open_mpi_ranks_on_every_node_agree_on_master_and_port():
    # mpirun's ranks on the first node live in the batch step; on the second, in the
    # one-node step that mpirun's `srun` started for its daemon there
    mpi = {
        "OMPI_COMM_WORLD_LOCAL_RANK": "0",
        "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        "OMPI_MCA_ess_base_jobid": "1888878593",
        "SLURM_JOB_ID": "17",
        "SLURM_JOB_NODELIST": "n[1-2]",
    }
    first = launchenv.detect(dict(mpi, OMPI_COMM_WORLD_RANK="0", SLURM_STEP_ID="batch"))
    second = launchenv.detect(dict(mpi, OMPI_COMM_WORLD_RANK="2", SLURM_STEP_ID="0", SLURM_STEP_NODELIST="n2"))
    assert (first.master_addr, first.master_port) == (second.master_addr, second.master_port)
    assert first.master_addr == "n1" and first.master_port == 10000 + 17 * 10 + 1888878593 % 10


def test_open_mpi_on_one_host_without_slurm_uses_loopback():
    env = {
        "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1",
        "OMPI_COMM_WORLD_SIZE": "2",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        "OMPI_MCA_ess_base_jobid": "3735879681",
    }
    launch = launchenv.detect(env)
    assert launch.master_addr == "127.0.0.1" and launch.master_port == 10000 + 3735879681 % 2000 * 10 + 3735879681 % 10


def test_open_mpi_across_hosts_without_a_master_is_an_error():
    env = {
        "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_RANK": "0",
        "OMPI_COMM_WORLD_SIZE": "2",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "1",
    }
    with pytest.raises(launchenv.LaunchError, match="MASTER_ADDR"):
        launchenv.detect(env)


def test_pmix_under_srun():
    env = dict(SLURM, PMIX_RANK="5")
    launch = launchenv.detect(env)
    assert (launch.source, launch.rank, launch.local_rank, launch.world_size) == ("pmix", 5, 1, 8)


def test_mpich_pmi():
    env = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2", "MASTER_PORT": "12345"}
    launch = launchenv.detect(env)
    assert (launch.source, launch.rank, launch.local_rank, launch.world_size, launch.master_port) == (
        "pmi",
        1,
        1,
        2,
        12345,
    )


def test_nothing_means_one_process():
    launch = launchenv.detect({})
    assert (launch.source, launch.rank, launch.world_size, launch.master_addr, launch.master_port) == (
        "single",
        0,
        1,
        "127.0.0.1",
        29500,
    )


def test_site_port_base_and_explicit_values_are_respected():
    assert launchenv.detect(dict(SLURM, HPCML_MASTER_PORT_BASE="20000")).master_port == 20000 + 4567890 % 2000 * 10
    assert launchenv.detect(dict(SLURM, MASTER_ADDR="login1", MASTER_PORT="4000")).master_addr == "login1"


@pytest.mark.parametrize(
    "env, message",
    [
        ({"SLURM_PROCID": "x", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2"}, "not a whole number"),
        ({"SLURM_PROCID": "3", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2"}, "inconsistent ranks"),
        ({"MASTER_PORT": "99999"}, "not a port"),
    ],
)
def test_inconsistent_input_is_a_clear_error(env, message):
    with pytest.raises(launchenv.LaunchError, match=message):
        launchenv.detect(env)


def test_apply_exports_all_six_variables():
    env = dict(SLURM)
    launchenv.apply(env)
    assert {name: env[name] for name in launchenv.VARIABLES} == {
        "RANK": "5",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "8",
        "LOCAL_WORLD_SIZE": "4",
        "MASTER_ADDR": "nid005",
        "MASTER_PORT": str(10000 + 4567890 % 2000 * 10),
    }


def test_command_line_prints_exports_and_runs_commands():
    # the master must resolve here: the first node of this list is this machine
    env = dict(SLURM, PATH="/usr/bin:/bin", SLURM_STEP_NODELIST="localhost,nid006")
    shown = subprocess.run([sys.executable, ROOT / "runtime" / "launchenv.py"], env=env, capture_output=True, text=True)
    assert "export RANK=5" in shown.stdout and "# from slurm" in shown.stdout
    ran = subprocess.run(
        [sys.executable, ROOT / "runtime" / "launchenv.py", "--", "sh", "-c", 'echo "$RANK/$WORLD_SIZE@$MASTER_ADDR"'],
        env=env,
        capture_output=True,
        text=True,
    )
    assert ran.stdout.strip() == "5/8@localhost"
    bad = subprocess.run(
        [sys.executable, ROOT / "runtime" / "launchenv.py"],
        env={"SLURM_PROCID": "9", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2"},
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: launchenv:")


def test_a_master_that_does_not_resolve_on_this_node_stops_the_rank_in_one_line():
    env = dict(SLURM, PATH="/usr/bin:/bin", SLURM_STEP_NODELIST="nid005.invalid,nid006.invalid")
    ran = subprocess.run(
        [sys.executable, ROOT / "runtime" / "launchenv.py", "--", "true"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2
    assert ran.stderr.startswith("error: launchenv: rank 5 on ") and ran.stderr.count("\n") == 1
    assert "MASTER_ADDR 'nid005.invalid' does not resolve here" in ran.stderr
    # one node: the name is never looked up (the ranks meet on this machine)
    alone = dict(env, SLURM_STEP_NODELIST="nid005.invalid", SLURM_STEP_TASKS_PER_NODE="8", SLURM_NODEID="0")
    assert (
        subprocess.run(
            [sys.executable, ROOT / "runtime" / "launchenv.py", "--", "true"], env=alone, timeout=60
        ).returncode
        == 0
    )


def test_the_command_wrapper_passes_on_which_launcher_set_the_ranks():
    env = {
        "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1",
        "OMPI_COMM_WORLD_SIZE": "2",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "launchenv",
            "--",
            sys.executable,
            "-c",
            "import launchenv; print(launchenv.detect().source)",
        ],
        cwd=ROOT / "runtime",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.strip() == "openmpi", result.stderr
