"""The launch pass alone (builder/run/job_launch.py): from a hand-made Placement and Steps to
the script's last lines and why. Every launch mode on every site: test_jobscript.py."""

import dataclasses

import pytest

from builder.run.job_environment import Steps
from builder.run.job_launch import KILL_ON_BAD_EXIT, launch_for
from builder.run.job_placement import Placement
from builder.run.job_request import Request

WHOLE_LUMI_NODE = Placement(gpus=8, ranks_per_node=8, tasks_per_node=8, cores_per_rank=7)
PROGRAM = ("/scratch/project_465000000/train.py", "--epochs", "2")


def test_srun_on_a_whole_node_binds_the_sites_masks_and_kills_the_step_on_a_failure(tree):
    lumi = tree.sites["lumi"]
    launch = launch_for(lumi, Request(), "srun", WHOLE_LUMI_NODE, Steps(), "w", PROGRAM)
    (line,) = launch.lines
    assert line.startswith(
        f"srun {KILL_ON_BAD_EXIT} --mpi=pmi2 --cpu-bind={lumi.cpu.cpu_bind} w exec python -m launchenv"
    )
    assert launch.why[0] == "CPU binding: the site's masks, nearest cores to each GPU (cpu.cpu_bind)"
    assert launch.why[-1].startswith("srun --kill-on-bad-exit=1")
    part = dataclasses.replace(WHOLE_LUMI_NODE, gpus=2, ranks_per_node=2, tasks_per_node=2)
    assert "--cpu-bind" not in launch_for(lumi, Request(), "srun", part, Steps(), "w", PROGRAM).lines[-1]


def test_one_exit_trap_removes_the_steps_folders_and_the_staged_copies(tree):
    steps = Steps(srun=("srun", "--x"), on_exit=("remove_node_dirs",))
    launch = launch_for(tree.sites["lumi"], Request(stage=("d",)), "srun", WHOLE_LUMI_NODE, steps, "w", PROGRAM)
    assert launch.lines[:2] == (
        'unstage() { srun --x --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 w unstage || true; }',
        "trap 'remove_node_dirs; unstage' EXIT",
    )
    assert launch.lines[-1].startswith(f"srun --x {KILL_ON_BAD_EXIT} ")


def test_torchrun_across_nodes_finds_its_rendezvous_host_first(tree):
    launch = launch_for(tree.sites["lumi"], Request(nodes=2), "torchrun", WHOLE_LUMI_NODE, Steps(), "w", PROGRAM)
    assert launch.lines[0].startswith("rdzv_host=")
    assert '--rdzv-endpoint="$rdzv_host:29400"' in launch.lines[1]


@pytest.mark.parametrize("program", [PROGRAM, ("-m", "smoke", "all")])
def test_the_hosts_mpirun_starts_the_ranks_where_slurm_has_no_mpi_plugin(tree, program):
    placed = Placement(ranks_per_node=2, tasks_per_node=2)
    launch = launch_for(tree.sites["local"], Request(), "mpirun", placed, Steps(), "w", program)
    assert launch.lines == (
        'mpirun -np "$SLURM_NTASKS" --map-by ppr:2:node w exec python -m launchenv -- python ' + " ".join(program),
    )
    assert launch.why == ("launch mpirun: the host's mpirun (Slurm here has no MPI plugin)",)
