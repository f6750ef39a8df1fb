"""Every key a site file may hold lands in the typed site model, and code reads the model,
never the raw file (the one exception: `show`, which prints the file as written)."""

import re

import yaml
from conftest import ROOT

# schema key path -> how the model holds it
FIELDS = {
    "description": lambda s: s.description,
    "gpu.vendor": lambda s: s.gpu_vendor, "gpu.model": lambda s: s.gpu_model,
    "gpu.arch": lambda s: list(s.archs), "gpu.per_node": lambda s: s.gpus_per_node,
    "cpu.cores_per_node": lambda s: s.cores_per_node, "cpu.cores_per_gpu": lambda s: s.cores_per_gpu,
    "cpu.mem_per_gpu_gb": lambda s: s.mem_per_gpu_gb, "cpu.cpu_bind": lambda s: s.cpu_bind,
    "runtime.command": lambda s: s.runtime, "runtime.path": lambda s: s.runtime_path,
    "runtime.requires_job": lambda s: s.requires_job,
    "runtime.module": lambda s: s.runtime_module, "runtime.image_dir": lambda s: s.image_dir,
    "runtime.image_copy": lambda s: s.image_copy,
    "modules.purge": lambda s: s.modules_purge, "modules.load": lambda s: list(s.modules_load),
    "mpi.host_module": lambda s: s.mpi_host_module,
    "binds": lambda s: list(s.binds),
    "scratch.tmpdir": lambda s: s.tmpdir, "scratch.node_local": lambda s: s.node_local,
    "env": lambda s: {k: v for k, v in s.env},
    "multi_node.binds": lambda s: list(s.multi_node_binds),
    "multi_node.env": lambda s: dict(s.multi_node_env),
    "multi_node.library_path": lambda s: list(s.multi_node_library_path),
    "mpi.abi": lambda s: s.mpi_abi, "mpi.host": lambda s: s.mpi_host,
    "mpi.slurm_mpi": lambda s: s.slurm_mpi,
    "launcher.default": lambda s: s.launcher_default,
    "launcher.master_port_base": lambda s: s.master_port_base,
    "slurm.account": lambda s: s.account and {"example": s.account.example, "pattern": s.account.pattern,
                                              "required": s.account.required},
    "slurm.gpu_request": lambda s: s.gpu_request, "slurm.gres_type": lambda s: s.gres_type,
    "slurm.mem": lambda s: s.mem_rule,
    "slurm.qos": lambda s: [{k: v for k, v in (("name", q.name), ("max_time", q.max_time),
                                               ("max_gpus", q.max_gpus), ("test", q.test)) if v} for q in s.qos],
    "slurm.constraint": lambda s: s.constraint, "slurm.sbatch": lambda s: list(s.sbatch_extra),
    # as written: a partition's max_gpus defaults to the node's GPUs, the flags to false
    "slurm.partitions": lambda s: {p.name: {k: v for k, v in (
        ("max_nodes", p.max_nodes), ("max_time", p.max_time),
        ("max_gpus", p.max_gpus if p.max_gpus != s.gpus_per_node else None),
        ("whole_nodes", p.whole_nodes), ("test", p.test), ("note", p.note)) if v}
        for p in s.partitions},
    "network.transport": lambda s: s.network["transport"],
    "network.provider": lambda s: s.network.get("provider"),
    "network.libfabric": lambda s: s.libfabric,
    "network.host_libfabric": lambda s: {"binds": list(s.host_libfabric_binds),
                                         "library_path": list(s.host_libfabric_library_path)},
    "gpu.wavefront_size": lambda s: s.wavefront_size,
    "allreduce": lambda s: list(s.allreduce),
    "notes": lambda s: list(s.notes), "retired": lambda s: s.retired,
}


def schema_keys():
    schema = yaml.safe_load((ROOT / "builder" / "recipes" / "schemas" / "site.yaml").read_text())
    keys = []
    for key, spec in schema["properties"].items():
        nested = spec.get("properties")
        keys += [f"{key}.{sub}" for sub in nested] if nested else [key]
    return sorted(keys)


def test_the_model_has_a_field_for_every_key_the_schema_allows():
    assert sorted(FIELDS) == schema_keys()


def test_every_key_of_every_site_file_reaches_the_model_unchanged(tree):
    for name, site in tree.sites.items():
        for path, read in FIELDS.items():
            value = site.data
            for part in path.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if value is not None:
                expected = {k: str(v) for k, v in value.items()} if path.endswith("env") else value
                assert read(site) == expected, (name, path)


def test_the_job_script_facts_are_there_for_lumi(tree):
    lumi = tree.sites["lumi"]
    assert lumi.cpu_bind.startswith("mask_cpu:0x00fe000000000000,")
    assert (lumi.cores_per_gpu, lumi.mem_per_gpu_gb, lumi.launcher_default) == (7, 60, "srun")
    dev = next(p for p in lumi.partitions if p.name == "dev-g")
    assert (dev.max_nodes, dev.max_time, dev.max_gpus, dev.test) == (32, "03:00:00", 8, True)
    assert [p.name for p in lumi.partitions] == ["dev-g", "standard-g", "small-g"]   # preference
    assert (lumi.gpu_request, lumi.mem_rule) == ("gpus-per-node", "per_gpu")
    assert (lumi.account.example, lumi.account.required) == ("project_465000000", True)


def test_no_code_outside_the_recipe_loader_reads_the_raw_site_file():
    readers = []
    for path in (ROOT / "builder").rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bsite\.data\b", line):
                readers.append(f"{path.relative_to(ROOT)}:{number}")
    assert [r for r in readers if not r.startswith(("builder/recipes/tree.py", "builder/cli.py"))] == []
