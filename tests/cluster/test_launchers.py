"""The wrapper under real launchers: srun from a Slurm cluster the tests start, torchrun inside
the container, and the host's Open MPI `mpirun` starting ranks inside the container."""

import os
import subprocess

import pytest
from conftest import ROOT

WRAPPER = str(ROOT / "wrappers" / "singularity_wrapper")
# Each line goes out in one write(2), so lines of ranks sharing a pipe cannot interleave.
SHOW_RANKS = (
    "import os, launchenv; l = launchenv.apply(); os.write(1, "
    "f'{l.rank} {l.local_rank} {l.world_size} {l.local_world_size} {l.source} {l.master_addr}\\n'.encode())"
)


@pytest.fixture
def env(apptainer, cpu_image):
    return dict(os.environ, SING_IMAGE=str(cpu_image), HPCML_APPTAINER=apptainer, HPCML_SITE="local")


def test_srun_tasks_get_their_ranks_from_slurm(slurm, env):
    result = subprocess.run(
        ["srun", "-n2", "--mpi=none", WRAPPER, "exec", "python", "-c", SHOW_RANKS],
        env=dict(env, SLURM_CONF=str(slurm.conf)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    host = os.uname().nodename.split(".")[0]
    assert sorted(result.stdout.splitlines()) == [f"0 0 2 2 slurm {host}", f"1 1 2 2 slurm {host}"]


ALLREDUCE = """
import datetime, os, torch, torch.distributed as dist, launchenv
launch = launchenv.apply()
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
os.write(1, f"{launch.source} rank {dist.get_rank()} of {dist.get_world_size()} sum {value.item():g}\\n".encode())
dist.destroy_process_group()
"""


def test_torchrun_inside_the_container_runs_a_gloo_all_reduce(env, tmp_path):
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    result = subprocess.run(
        [WRAPPER, "exec", "torchrun", "--standalone", "--nproc-per-node=2", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(line for line in result.stdout.splitlines() if "sum" in line) == [
        "torchrun rank 0 of 2 sum 3",
        "torchrun rank 1 of 2 sum 3",
    ]


MPI_ALLREDUCE = (
    "import os; from mpi4py import MPI; import launchenv; c = MPI.COMM_WORLD; "
    "l = launchenv.apply(); os.write(1, "
    "f'{c.Get_rank()} {c.Get_size()} {c.allreduce(c.Get_rank() + 1)} {l.source} {l.rank}\\n'.encode())"
)


def test_host_mpirun_starts_ranks_inside_the_container(env):
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
            "-c",
            MPI_ALLREDUCE,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert sorted(result.stdout.splitlines()) == ["0 2 3 openmpi 0", "1 2 3 openmpi 1"]
