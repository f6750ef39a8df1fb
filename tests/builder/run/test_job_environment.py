"""The environment, storage and steps passes alone (builder/run/job_environment.py), each
from a site and a request to its own frozen record. The scripts they end up in:
test_jobscript_environment.py."""

import dataclasses
import json

import pytest

from builder.errors import RecipeError
from builder.run.job_environment import Steps, Storage, environment_for, steps_for, storage_for
from builder.run.job_request import Request

PLACED = (("job-name", "x"), ("nodes", "1"), ("time", "30"), ("open-mode", "append"))


def test_the_environment_of_a_plain_job_is_its_image_from_the_folder_and_the_wrapper(tree, tmp_path):
    request = Request(wrapper="my_wrapper", folder=str(tmp_path))
    environment = environment_for(tree.sites["local"], tree.target("cpu"), request, "torchrun")
    assert environment.image == str(tmp_path / "images" / "cpu.sif")
    assert (environment.wrapper, environment.published, environment.module_lines) == ("my_wrapper", None, ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        environment.image = "other.sif"


def test_a_published_version_is_loaded_and_sets_the_image(tree, tmp_path):
    version = tmp_path / "prefix" / "pytorch" / "2.9-cpu"
    version.mkdir(parents=True)
    record = {"name": "pytorch", "version": "2.9-cpu", "target": "cpu", "site": "local"}
    (version / "publish.json").write_text(json.dumps(record))
    environment = environment_for(tree.sites["local"], tree.target("cpu"), Request(published=str(version)), "srun")
    assert environment.published.module == "pytorch/2.9-cpu"
    assert environment.module_lines == (f"module use {tmp_path}/prefix/modulefiles", "module load pytorch/2.9-cpu")
    assert (environment.image, environment.wrapper) == ("", "singularity_wrapper")  # the module sets both


def test_no_pool_asked_adds_nothing_to_the_placement(tree):
    storage = storage_for(tree.sites["roihu"], Request(), gpus=4)
    assert storage == Storage() and storage.placed_in(PLACED) == PLACED


def test_a_pool_is_asked_in_front_of_the_time_and_notes_what_part_of_a_node_costs(tree, monkeypatch):
    monkeypatch.setenv("USER", "alice")
    storage = storage_for(tree.sites["roihu"], Request(nvme_pool="20G"), gpus=1)
    asked = (("exclusive", ""), ("bb", '"#BB_LUA SBF storagesize=20G path=/run/sbb/alice"'))
    assert storage.sbatch == asked
    assert storage.placed_in(PLACED) == (*PLACED[:2], *asked, *PLACED[2:])
    assert storage.node_local == "/run/sbb/${USER}"
    assert storage.notes == (
        "--nvme-pool needs --exclusive on roihu: the job is billed for all 4 GPUs of each node, not the 1 it uses",
    )
    assert storage_for(tree.sites["roihu"], Request(nvme_pool="20G"), gpus=4).notes == ()


def test_steps_across_nodes_carry_the_sites_options_and_make_its_folders_first(tree):
    lumi = tree.sites["lumi"]
    steps = steps_for(lumi, 2, "srun")
    assert steps.srun == ("srun", "--network=disable_rdzv_get") and steps.on_exit == ("remove_node_dirs",)
    made = [line for line in steps.lines if "mkdir -p" in line]
    assert made == [
        'srun --network=disable_rdzv_get --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 '
        'mkdir -p "$MIOPEN_USER_DB_PATH" "$MIOPEN_CUSTOM_CACHE_DIR"'
    ]
    assert steps_for(lumi, 1, "srun").srun == ("srun",)  # one node: none of the multi-node options
    assert steps_for(tree.sites["local"], 2, "srun") == Steps()  # no options, no folders


def test_steps_refuse_the_hosts_mpirun_where_multi_node_jobs_need_srun_options(tree):
    lumi = tree.sites["lumi"]
    no_plugin = dataclasses.replace(lumi, mpi=dataclasses.replace(lumi.mpi, slurm_mpi="none"))
    with pytest.raises(RecipeError, match="--launch mpirun on 2 nodes: .* use --launch srun"):
        steps_for(no_plugin, 2, "mpirun")
