"""The placement pass alone (builder/run/job_placement.py): from a site and a request, without
a target's image or a script, each step returning a new frozen Placement. The scripts it ends
up in: test_jobscript_placement.py."""

import dataclasses

import pytest

from builder.errors import RecipeError
from builder.run.job_placement import Placement, choose_partition, placement_for, resources, size
from builder.run.job_request import Request

LUMI_ACCOUNT = "project_465000000"


@pytest.mark.parametrize(
    "launch, tasks, cpus",
    [("srun", 2, 7), ("torchrun", 1, 14)],  # torchrun: one task starts both ranks, with their cores
)
def test_size_gives_ranks_per_gpu_and_slurm_tasks_per_launch(tree, launch, tasks, cpus):
    sized = size(tree.sites["lumi"], Request(gpus=2), launch)
    assert (sized.gpus, sized.ranks_per_node, sized.cores_per_rank) == (2, 2, 7)
    assert (sized.tasks_per_node, sized.cpus_per_task) == (tasks, cpus)
    assert sized.why == ("2 GPU(s) per node, one rank each, 7 cores per rank (cpu.cores_per_gpu)",)
    assert sized.partition is None and sized.sbatch == ()  # the later steps' parts


def test_size_on_a_cpu_site_shares_the_node_out_among_the_ranks(tree):
    sized = size(tree.sites["local"], Request(tasks_per_node=2), "srun")
    assert (sized.gpus, sized.ranks_per_node, sized.tasks_per_node, sized.cores_per_rank) == (0, 2, 2, 1)


def test_choosing_a_partition_adds_it_and_its_reason_and_keeps_the_rest(tree):
    lumi, request = tree.sites["lumi"], Request(gpus=8, time="2-12:00:00")
    sized = size(lumi, request, "srun")
    chosen = choose_partition(lumi, request, sized)
    assert chosen.partition.name == "small-g"
    assert chosen.why == (
        *sized.why,
        "partition small-g (part of a node): the first of the site's that fits; "
        "skipped standard-g: --time 2-12:00:00 > 2-00:00:00",
    )
    assert dataclasses.replace(chosen, partition=None, why=sized.why) == sized
    assert sized.partition is None  # the step's input is left as it was


def test_resources_ask_in_the_sites_form_from_any_placement(tree):
    """A Placement made by hand: the step reads only what it is given."""
    placed = Placement(gpus=4, ranks_per_node=4, tasks_per_node=1, cores_per_rank=32)
    request = Request(nodes=2, time="1:00:00", account="project_2001234")
    done = resources(tree.sites["mahti"], tree.target("a100-cuda"), request, placed)
    assert done.sbatch == (
        ("job-name", "a100-cuda"),
        ("account", "project_2001234"),
        ("nodes", "2"),
        ("ntasks-per-node", "1"),
        ("cpus-per-task", "128"),
        ("gres", "gpu:a100:4"),
        ("time", "1:00:00"),
        ("open-mode", "append"),
    )
    assert done.why == ("GPUs asked as --gres (slurm.gpu_request: gres)",) and done.mem == ""


def test_the_placement_is_whole_and_frozen(tree):
    request = Request(gpus=2, time="30", account=LUMI_ACCOUNT)
    placed = placement_for(tree.sites["lumi"], tree.target("lumi-rocm"), request, "srun")
    assert placed.partition.name == "small-g" and placed.mem == "120G"
    assert ("mem", "120G") in placed.sbatch and placed.sbatch[-2:] == (("time", "30"), ("open-mode", "append"))
    assert placed.why[-1] == "memory 120G: 60 GB per GPU (slurm.mem: per_gpu)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        placed.gpus = 8


def test_the_placement_refuses_what_the_site_cannot_serve_before_any_other_pass(tree):
    with pytest.raises(RecipeError, match="--gpus 9: lumi has 8 GPUs per node"):
        placement_for(tree.sites["lumi"], tree.target("lumi-rocm"), Request(gpus=9, time="30"), "srun")
