"""Every key a site file may hold lands in the typed site model under the same name (`gpu.per_node`
in YAML is `site.gpu.per_node` in code), and code reads the model, never the raw file (the one
exception: `show`, which prints the file as written)."""

import re
import shutil
from dataclasses import fields, is_dataclass

import pytest
import yaml
from conftest import ROOT
from helpers.cli_here import run_here

from builder.errors import RecipeError
from builder.recipes.site_model import Site
from builder.recipes.tree import RecipeTree


def schema_keys():
    schema = yaml.safe_load((ROOT / "builder" / "recipes" / "schemas" / "site.yaml").read_text())
    keys = []
    for key, spec in schema["properties"].items():
        nested = spec.get("properties")
        keys += [(key, sub) for sub in nested] if nested else [(key,)]
    return keys


def test_the_model_has_a_field_of_the_same_name_for_every_key_the_schema_allows():
    parts = {f.name: f.type for f in fields(Site)}
    missing = []
    for key in schema_keys():
        if key[0] not in parts or len(key) > 1 and key[1] not in {f.name for f in fields(parts[key[0]])}:
            missing.append(".".join(key))
    assert missing == []


def reaches(model, written, where):
    """Assert that the model holds what the file wrote at ``where``, key by key."""
    if isinstance(written, dict) and isinstance(model, tuple) and all(is_dataclass(i) for i in model):
        model = {item.name: item for item in model}  # slurm.partitions, by name
        assert list(model) == list(written), where  # in the file's order
        for name, spec in written.items():
            reaches(model[name], spec, f"{where}.{name}")
    elif isinstance(written, dict) and isinstance(model, tuple) and all(is_dataclass(i[1]) for i in model):
        assert [name for name, _ in model] == list(written), where  # site_image.others, in order
        for name, item in model:
            reaches(item, written[name], f"{where}.{name}")
    elif isinstance(written, dict) and isinstance(model, tuple):
        assert dict(model) == {k: str(v) for k, v in written.items()}, where  # environment variables
    elif isinstance(written, dict):
        for key, value in written.items():
            reaches(getattr(model, key), value, f"{where}.{key}")
    elif isinstance(written, list) and written and isinstance(written[0], dict):
        assert len(model) == len(written), where  # slurm.qos, allreduce
        for index, (item, spec) in enumerate(zip(model, written)):
            reaches(item, spec, f"{where}[{index}]")
    elif isinstance(written, list):
        assert list(model) == written, where
    else:
        assert model == written, where


def test_every_key_of_every_site_file_reaches_the_model_by_its_name(tree):
    for name, site in tree.sites.items():
        reaches(site, tree.site_docs[name].data, name)


def test_what_a_site_file_leaves_out_takes_the_defaults(tree):
    local = tree.sites["local"]
    assert (local.cpu.cores_per_gpu, local.launcher.default, local.slurm.mem) == (0, "torchrun", "none")
    assert (local.slurm.account, local.slurm.partitions, local.network.libfabric) == (None, (), "")
    jean_zay = tree.sites["jean-zay"]
    assert all(
        part.max_gpus == jean_zay.gpu.per_node
        for part in jean_zay.slurm.partitions
        if "max_gpus" not in tree.site_docs["jean-zay"].data["slurm"]["partitions"][part.name]
    )


def test_the_job_script_facts_are_there_for_lumi(tree):
    lumi = tree.sites["lumi"]
    assert lumi.cpu.cpu_bind.startswith("mask_cpu:0x00fe000000000000,")
    assert (lumi.cpu.cores_per_gpu, lumi.cpu.mem_per_gpu_gb, lumi.launcher.default) == (7, 60, "srun")
    dev = next(p for p in lumi.slurm.partitions if p.name == "dev-g")
    assert (dev.max_nodes, dev.max_time, dev.max_gpus, dev.test) == (32, "03:00:00", 8, True)
    assert [p.name for p in lumi.slurm.partitions] == ["dev-g", "standard-g", "small-g"]  # preference
    assert (lumi.slurm.gpu_request, lumi.slurm.mem) == ("gpus-per-node", "per_gpu")
    assert (lumi.slurm.account.example, lumi.slurm.account.required) == ("project_465000000", True)


def test_lumis_multi_node_srun_options_and_the_folders_its_jobs_make(tree):
    lumi = tree.sites["lumi"]
    assert lumi.multi_node.srun_options == ("--network=disable_rdzv_get",)
    assert lumi.scratch.make_dirs == ("MIOPEN_USER_DB_PATH", "MIOPEN_CUSTOM_CACHE_DIR")
    assert all("${SLURM_JOB_ID:-nojob}" in folder for _, folder in lumi.dirs_to_make)  # one pair per job
    local = tree.sites["local"]
    assert (local.multi_node.srun_options, local.scratch.make_dirs, local.dirs_to_make) == ((), (), ())


def site_error(tmp_path, site, old, new) -> tuple:
    """(file: line of ``new``, the error) when a copy of the site's file says ``new`` for ``old``."""
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    path = recipes / "sites" / f"{site}.yaml"
    text = path.read_text().replace(old, new)
    path.write_text(text)
    with pytest.raises(RecipeError) as raised:
        RecipeTree(recipes).site(site)
    return f"{path}:{text[: text.index(new)].count(chr(10)) + 1}", str(raised.value)


def test_make_dirs_names_variables_of_env_only(tmp_path):
    where, error = site_error(tmp_path, "lumi", "MIOPEN_CUSTOM_CACHE_DIR]", "MIOPEN_CACHE]")
    assert (
        error
        == f"{where}: scratch.make_dirs.1: MIOPEN_CACHE is not a variable of env; expected one that names a folder"
    )


def test_no_code_outside_the_recipe_loader_reads_the_raw_site_file():
    readers = []
    for path in (ROOT / "builder").rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bsite_docs\b|\bsite\.data\b", line):
                readers.append(f"{path.relative_to(ROOT)}:{number}")
    assert [r for r in readers if not r.startswith(("builder/recipes/tree.py", "builder/cli/"))] == []


def test_roihus_partitions_carry_per_job_gpu_limits_and_others_none(tree):
    """CSC's batch-job-partitions.md: gpumedium takes at most 4 GPUs per job, gpularge at least 4."""
    roihu = tree.sites["roihu"]
    limits = {
        p.name: (p.max_nodes, p.max_time, p.max_job_gpus, p.min_job_gpus, p.whole_nodes, p.test)
        for p in roihu.slurm.partitions
    }
    assert limits == {
        "gputest": (2, "00:15:00", 0, 0, False, True),
        "gpumedium": (4, "1-12:00:00", 4, 0, False, False),
        "gpularge": (10, "1-12:00:00", 0, 4, True, False),
    }
    assert (roihu.cpu.arch, roihu.cpu.cores_per_gpu, roihu.slurm.gres_type, roihu.scratch.tmpdir) == (
        "aarch64",
        72,
        "gh200",
        "$TMPDIR",
    )
    others = [p for name, site in tree.sites.items() if name != "roihu" for p in site.slurm.partitions]
    assert others and all((p.max_job_gpus, p.min_job_gpus) == (0, 0) for p in others)  # not said: no limit


def test_a_per_job_gpu_floor_above_the_ceiling_is_one_located_line(tmp_path):
    where, error = site_error(tmp_path, "roihu", "max_job_gpus: 4,", "max_job_gpus: 4, min_job_gpus: 8,")
    assert error == (
        f"{where}: slurm.partitions.gpumedium.min_job_gpus: min_job_gpus 8 > max_job_gpus 4; "
        "expected a floor at or below the ceiling"
    )


def test_karolinas_gpu_queues_carry_a_node_floor_and_those_only_for_when_named(tree):
    """IT4I's resources-allocation-policy: qgpu_big takes jobs above 16 nodes; qgpu_free (a spent
    project's, whole nodes, 18 h) and qgpu_preempt (killed and requeued) only when named."""
    karolina = tree.sites["karolina"]
    limits = {
        p.name: (p.min_nodes, p.max_nodes, p.max_time, p.whole_nodes, p.test, p.only_when_named, p.automatic)
        for p in karolina.slurm.partitions
    }
    assert limits == {
        "qgpu_exp": (1, 8, "01:00:00", False, True, False, False),
        "qgpu": (1, 16, "2-00:00:00", False, False, False, True),
        "qgpu_big": (17, 72, "2-00:00:00", False, False, False, True),
        "qgpu_free": (1, 72, "18:00:00", True, False, True, False),
        "qgpu_preempt": (1, 72, "2-00:00:00", False, False, True, False),
    }
    assert (karolina.gpu.per_node, karolina.cpu.cores_per_gpu) == (8, 16)
    others = [p for name, site in tree.sites.items() if name != "karolina" for p in site.slurm.partitions]
    assert others and all((p.min_nodes, p.only_when_named) == (1, False) for p in others)  # not said: none


def test_a_node_floor_above_the_ceiling_is_one_located_line(tmp_path):
    where, error = site_error(tmp_path, "karolina", "min_nodes: 17", "min_nodes: 80")
    assert error == (
        f"{where}: slurm.partitions.qgpu_big.min_nodes: min_nodes 80 > max_nodes 72; "
        "expected a floor at or below the ceiling"
    )
    result = run_here("jobscript", "--recipes", tmp_path / "recipes", "a100-cuda", "--site", "karolina", "--", "x.py")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "min_nodes 80 > max_nodes 72" in result.stderr and "Traceback" not in result.stderr
