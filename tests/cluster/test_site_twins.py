"""Job scripts that run as written (issue 31): for each site file, a twin of the site on the
two-node test cluster (tests/helpers/site_twin.py: its partitions, GPU GRES, node shape, stand-in
modules and image folder), the script `jobscript` writes for each launch mode on one and
two nodes submitted unchanged with sbatch, running the smoke suite's CPU checks in the CPU
image, which stands in for the site's image under the site's image name.

The submitting shell is a login shell of the twin: Lmod initialised with the site's module
path, the site's variables (SINGULARITY_ALLOWED_DIR) and nothing of this project on PATH.
Neither HPCML_APPTAINER nor HPCML_SITE_FILE is set: the script finds the runtime, the
wrapper and the image by itself, or the job fails."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import RECIPES, run_builder
from helpers import site_twin
from helpers.slurm_jobs import C10D_NO_NAME, NEEDS_TWO_NODES, QUICK, wait_for

from builder.fileio import link_or_copy

pytestmark = NEEDS_TWO_NODES
# the site files of machines in service, each with the target built for it
SITES = {
    "lumi": "lumi-rocm",
    "jean-zay": "a100-cuda",
    "jean-zay-v100": "v100-cuda",
    "jean-zay-h100": "h100-cuda",
    "karolina": "a100-cuda",
    "local": "cpu",
    "roihu": "gh200-cuda",
}
# Sites whose scripts run on their twin in these shapes only, (nodes, launch). Every launch on one
# and two nodes runs on a twin of each kind of Slurm MPI plugin (none: local; pmix: jean-zay;
# pmi2: lumi); the other sites' scripts differ from those in their partitions,
# GRES and node shape alone, so two runs each prove them, and between them every launch mode
# and node count, while the default run stays within CI's time (each run is 30 to 90 s).
FEWER_RUNS = {
    "jean-zay-v100": ((2, "torchrun"), (1, "srun")),  # torchrun across nodes takes whole 4-GPU nodes
    "jean-zay-h100": ((1, "torchrun"), (2, "mpirun")),
    "karolina": ((2, "deepspeed"), (1, "mpirun")),
    "roihu": ((1, "torchrun"), (2, "srun")),
}
# Of those, make test runs these (12 runs, a third of the time): four on the twin without an
# MPI plugin, two on each plugin's twin, one on each other site, and between them every launch
# on one node and on two; make test-full runs the rest (marker `full`).
REPRESENTATIVE_RUNS = {
    "local": ((1, "torchrun"), (1, "srun"), (2, "mpirun"), (2, "deepspeed")),
    "jean-zay": ((2, "srun"), (1, "mpirun")),
    "lumi": ((2, "srun"), (1, "deepspeed")),
    "jean-zay-v100": ((2, "torchrun"),),
    "jean-zay-h100": ((2, "mpirun"),),
    "karolina": ((2, "deepspeed"),),
    "roihu": ((1, "torchrun"),),
}
LAUNCHES = ("srun", "torchrun", "mpirun", "deepspeed")
# What the stand-in image cannot do on a twin, and why. LUMI's image carries MPICH (cray-mpich's
# ABI) for srun --mpi=pmi2; the CPU image standing in for it carries Debian's Open MPI, whose
# MPI_Init cannot start under PMI-2: its mpi4py check fails there, and only that check.
STAND_IN_LIMITS = {"lumi": {"mpi4py": "MPI_INIT"}}


@pytest.fixture(scope="module", params=sorted(SITES))
def twin(request, tmp_path_factory, apptainer, cpu_image):
    """The site's twin, up for the tests of that site, and the shell a user submits from."""
    from helpers.site_twin import Twin
    from helpers.twonode_cluster import TwoNodes

    from builder.recipes.tree import RecipeTree

    site = RecipeTree(RECIPES).site(request.param)
    root = tmp_path_factory.mktemp(f"twin-{site.name}")
    model = Twin(site, root / "site", apptainer)
    cluster = TwoNodes(root / "cluster", twin=model)
    try:
        cluster.start()
        yield Submitting(model, cluster, SITES[site.name], cpu_image)
    finally:
        cluster.stop()


class Submitting:
    """A login shell on the twin: what it has set, and how it writes and submits scripts."""

    def __init__(self, model, cluster, target, cpu_image):
        self.model, self.cluster, self.site, self.target = model, cluster, model.site, target
        self.cpu_image = cpu_image
        self.env = site_twin.login_env(model, cluster)

    def stand_in_image(self, folder: Path) -> Path:
        """The CPU image under the name the script looks for: in the site's image folder, or
        images/<target>.sif under the submit folder."""
        where = (self.model.image_dir() if self.site.runtime.image_dir else folder / "images") / f"{self.target}.sif"
        if not where.exists():
            where.parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(self.cpu_image, where)
        return where

    def write(self, folder: Path, *options, program=QUICK):
        """The script, written as a user writes it: in the folder the job is submitted from."""
        account = ("--account", self.site.slurm.account.example) if self.site.slurm.account else ()
        script = folder / "job.sh"
        written = run_builder(
            "jobscript",
            self.target,
            "--site",
            self.site.name,
            *account,
            *options,
            "--out",
            script,
            "--",
            *program,
            cwd=folder,
        )
        assert written.returncode == 0, written.stderr
        return script

    def sbatch(self, folder: Path, *argv):
        return site_twin.sbatch(self.env, folder, *argv)


def shapes(site):
    """(launch, nodes, request) for every launch mode on one and two nodes: two GPUs a node
    (whole nodes where torchrun across nodes asks for them), two ranks on a CPU site."""
    for launch in LAUNCHES:
        for nodes in (1, 2):
            if not site.gpu.per_node:
                size = {"tasks_per_node": 2}
            elif launch == "torchrun" and nodes > 1:
                size = {}
            else:
                size = {"gpus": min(2, site.gpu.per_node)}
            yield launch, nodes, dict(launch=launch, nodes=nodes, time="00:20:00", **size)


def options(request):
    """The command line of a request: {"tasks_per_node": 2} -> --tasks-per-node 2."""
    return [word for key, value in request.items() for word in (f"--{key.replace('_', '-')}", str(value))]


def test_sbatch_test_only_accepts_every_script_the_generator_writes(twin, tree, tmp_path):
    """Every launch on one and two nodes, every GPU count a node can have, and each test
    partition and QoS of the site named: the twin's Slurm would start each of them."""
    from builder.run import jobscript

    variants = [request for _, _, request in shapes(twin.site)]
    gpus = twin.site.gpu.per_node
    variants += [dict(launch="srun", gpus=count) for count in range(1, gpus + 1)]
    # each partition at its fewest nodes; one whose floor is above the twin's two nodes (Karolina's
    # qgpu_big) is held to its floor instead (test_the_twin_refuses_a_job_below_a_partitions_floor)
    variants += [
        dict(partition=part.name, time="00:10:00", nodes=part.min_nodes)
        for part in twin.site.slurm.partitions
        if part.min_nodes <= 2
    ]
    variants += [dict(qos=qos.name, time="00:30:00") for qos in twin.site.slurm.qos]
    account = {"account": twin.site.slurm.account.example} if twin.site.slurm.account else {}
    refused = []
    for index, request in enumerate(variants):
        plan = jobscript.plan(
            tree, twin.target, jobscript.Request(site=twin.site.name, program=("train.py",), **account, **request)
        )
        script = tmp_path / f"job-{index}.sh"
        script.write_text(jobscript.script(plan))
        tried = twin.sbatch(tmp_path, "--test-only", str(script))
        if tried.returncode != 0 or "to start at" not in tried.stderr:
            refused.append((request, tried.stderr.strip()[-300:]))
    assert refused == [], refused
    assert len(variants) >= 8 + gpus


# the local site names no partition: its cluster's default has no limits to hold
@pytest.mark.parametrize("twin", sorted(set(SITES) - {"local"}), indirect=True)
def test_the_twin_refuses_a_job_beyond_a_partitions_limits_as_the_generator_does(twin, tmp_path):
    """The twin holds the site's limits (EnforcePartLimits=ALL): asked by hand for more time
    than the first partition allows, its Slurm says no; the generator says so first."""
    part = twin.site.slurm.partitions[0]
    days, _, clock = part.max_time.rpartition("-")
    hours = int(days or 0) * 24 + int(clock.split(":")[0])
    too_long = f"{hours + 1}:00:00"
    script = tmp_path / "by-hand.sh"
    script.write_text("#!/bin/bash\nhostname\n")
    tried = twin.sbatch(tmp_path, "--test-only", f"--partition={part.name}", f"--time={too_long}", str(script))
    assert tried.returncode != 0 and "time limit" in tried.stderr.lower(), tried.stderr
    account = ("--account", twin.site.slurm.account.example) if twin.site.slurm.account else ()
    generated = run_builder(
        "jobscript",
        twin.target,
        "--site",
        twin.site.name,
        *account,
        "--partition",
        part.name,
        "--time",
        too_long,
        "--",
        "train.py",
    )
    assert generated.returncode == 2, generated.stderr
    assert generated.stderr.count("\n") == 1 and f"--partition {part.name} does not fit" in generated.stderr


@pytest.mark.parametrize("twin", ["karolina"], indirect=True)
def test_the_twin_refuses_a_job_below_a_partitions_floor_as_the_generator_does(twin, tmp_path):
    """Karolina's qgpu_big takes only jobs above 16 nodes (slurm.partitions.*.min_nodes): asked
    by hand for fewer, the twin's Slurm says no (MinNodes, EnforcePartLimits=ALL); the generator
    says so first, and names the partition that takes the job."""
    part = next(part for part in twin.site.slurm.partitions if part.min_nodes > 1)
    script = tmp_path / "by-hand.sh"
    script.write_text("#!/bin/bash\nhostname\n")
    tried = twin.sbatch(tmp_path, "--test-only", f"--partition={part.name}", "--nodes=2", str(script))
    assert tried.returncode != 0 and "node count" in tried.stderr.lower(), tried.stderr
    generated = run_builder(
        "jobscript",
        twin.target,
        "--site",
        twin.site.name,
        "--account",
        twin.site.slurm.account.example,
        "--partition",
        part.name,
        "--nodes",
        "2",
        "--",
        "train.py",
    )
    assert generated.returncode == 2, generated.stderr
    assert generated.stderr.count("\n") == 1, generated.stderr
    assert f"--partition {part.name} does not fit this job (2 nodes < {part.min_nodes}); qgpu takes it" in (
        generated.stderr
    )


def twin_runs():
    for site in sorted(SITES):
        for nodes in (1, 2):
            for launch in LAUNCHES:
                if (nodes, launch) in FEWER_RUNS.get(site, ((nodes, launch),)):
                    full = () if (nodes, launch) in REPRESENTATIVE_RUNS[site] else pytest.mark.full
                    yield pytest.param(site, nodes, launch, id=f"{site}-{nodes}-{launch}", marks=full)


@pytest.mark.parametrize("twin, nodes, launch", list(twin_runs()), indirect=["twin"])
def test_the_unchanged_script_runs_the_smoke_checks_on_the_twin(twin, tmp_path, launch, nodes):
    request = next(r for how, n, r in shapes(twin.site) if (how, n) == (launch, nodes))
    twin.stand_in_image(tmp_path)
    script = twin.write(tmp_path, *options(request))
    text = script.read_text()
    assert "HPCML_APPTAINER" not in text and "HPCML_SITE_FILE" not in text
    log = tmp_path / "job.log"
    started = time.monotonic()
    submitted = twin.sbatch(tmp_path, "--parsable", f"--output={log}", str(script))
    assert submitted.returncode == 0, submitted.stderr
    state = wait_for(submitted.stdout.strip().split(";")[0], twin.cluster.env, timeout=600)
    took = time.monotonic() - started
    output = log.read_text() if log.exists() else ""
    print(f"\n{twin.site.name} {launch} on {nodes} node(s): sbatch to job end {took:.1f} s", file=sys.stderr)
    written = tmp_path / "smoke-report" / "smoke.json"
    assert written.exists(), f"{state}: no smoke report\n{output[-6000:]}"
    report = json.loads(written.read_text())
    limits = {
        check: why
        for check, why in STAND_IN_LIMITS.get(twin.site.name, {}).items()
        if report["checks"].get(check, {}).get("verdict") != "none"
    }
    # with a check failing as it must, srun ends the other ranks: the exit code is whichever ended first
    assert (state[0] if limits else state) == ("FAILED" if limits else ("COMPLETED", "0:0")), output[-6000:]
    machine = report["machine"]
    ranks_per_node = int(re.search(r"ntasks-per-node=(\d+)", text).group(1))
    if launch == "torchrun" or (launch == "deepspeed" and nodes == 1):
        ranks_per_node = int(re.search(r"(?:--nproc-per-node=|--num_gpus=)(\d+)", text).group(1))
    assert (machine["nodes"], machine["ranks"]) == (nodes, nodes * ranks_per_node), output[-3000:]
    assert machine["site"] == twin.site.name
    mpi = "pmix" if twin.site.mpi.slurm_mpi.startswith("pmix") else "pmi" if twin.site.mpi.slurm_mpi != "none" else ""
    if launch != "deepspeed" or nodes > 1:  # DeepSpeed's own launcher names none
        assert (
            machine["launcher"]
            == {
                "srun": mpi or "slurm",
                "torchrun": "torchrun",
                "mpirun": mpi or "openmpi",
                "deepspeed": mpi or "slurm",
            }[launch]
        ), machine
    for check, result in report["checks"].items():
        if check in limits:
            assert result["verdict"] == "fail" and limits[check] in result["why"], (check, result)
        else:
            assert result["verdict"] in ("pass", "none", "not measured"), (check, result)
    assert report["checks"]["allreduce sum"]["verdict"] == "pass"
    # issue 33: subgroups, and on two nodes groups across them, set up and all-reduce in time
    groups = report["checks"]["groups"]
    assert groups["verdict"] == "pass" and (", 0 across nodes" not in groups["why"]) == (nodes > 1), groups
    # issue 30: every address the ranks meet has a name on the nodes, in the form c10d asks for
    assert C10D_NO_NAME not in output, output[-4000:]


# the CPU image can be published for its own site only
@pytest.mark.parametrize("twin", ["local"], indirect=True)
def test_a_script_for_a_published_image_loads_its_module_and_runs_on_two_nodes(twin, tmp_path, apptainer):
    """--published: the script loads the module publish installed (module use PREFIX/modulefiles;
    module load NAME/VERSION), which alone provides singularity_wrapper and the image here."""
    prefix = tmp_path / "appl"
    prefix.mkdir()
    published = run_builder(
        "publish",
        "cpu",
        "--images",
        twin.cpu_image.parent,
        "--prefix",
        prefix,
        "--version",
        "twin",
        "--skip-smoke",
        env={"HPCML_APPTAINER": apptainer},
        timeout=300,
    )
    assert published.returncode == 0, published.stderr
    script = twin.write(
        tmp_path,
        "--published",
        prefix / "pytorch" / "twin",
        "--launch",
        "srun",
        "--nodes",
        "2",
        "--tasks-per-node",
        "2",
        "--time",
        "00:20:00",
    )
    text = script.read_text()
    assert f"module use {prefix}/modulefiles\nmodule load pytorch/twin\n" in text and "SING_IMAGE=" not in text
    log = tmp_path / "job.log"
    submitted = twin.sbatch(tmp_path, "--parsable", f"--output={log}", str(script))
    assert submitted.returncode == 0, submitted.stderr
    state = wait_for(submitted.stdout.strip().split(";")[0], twin.cluster.env, timeout=600)
    output = log.read_text() if log.exists() else ""
    assert state == ("COMPLETED", "0:0"), output[-6000:]
    report = json.loads((tmp_path / "smoke-report" / "smoke.json").read_text())
    assert (report["machine"]["nodes"], report["machine"]["ranks"], report["verdict"]) == (2, 4, "pass")


@pytest.mark.parametrize("twin", ["jean-zay"], indirect=True)
def test_without_its_module_line_the_jean_zay_script_cannot_start_the_container(twin, tmp_path):
    """The twin catches problem 1 as the site would: the same script less `module load
    singularity` (what jobscript wrote before) stops in the wrapper, naming the module."""
    twin.stand_in_image(tmp_path)
    script = twin.write(tmp_path, "--launch", "srun", "--gpus", "1", "--time", "00:10:00")
    text = script.read_text()
    assert "module load singularity\n" in text
    script.write_text(text.replace("module load singularity\n", ""))
    log = tmp_path / "job.log"
    submitted = twin.sbatch(tmp_path, "--parsable", f"--output={log}", str(script))
    assert submitted.returncode == 0, submitted.stderr
    state, _ = wait_for(submitted.stdout.strip().split(";")[0], twin.cluster.env, timeout=300)
    assert state == "FAILED"
    assert (
        "neither apptainer nor singularity found; on jean-zay load it first: module load singularity" in log.read_text()
    ), log.read_text()[-3000:]


# what the project's own program prints in each rank: the python of the image, where it runs
HELLO = """import os, sys, torch
print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}: {__file__} in {os.getcwd()} "
      f"torch {torch.__version__} {sys.prefix}", flush=True)
"""


@pytest.mark.parametrize("twin", ["local"], indirect=True)
def test_a_script_written_outside_the_checkout_runs_from_another_folder(twin, tmp_path):
    """Issue 47: the installed hpcml, run in a project folder outside the checkout, reads the
    recipes it carries and names the image and the program by absolute paths; submitted from
    another folder, the job runs them there."""
    project, submit = tmp_path / "project", tmp_path / "submit"
    project.mkdir()
    submit.mkdir()
    (project / "hello.py").write_text(HELLO)
    twin.stand_in_image(project)  # project/images/cpu.sif, the script's default
    hpcml = Path(sys.executable).with_name("hpcml")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith(("HPCML_", "SING_"))}
    options = ["--site", "local", "--nodes", "2", "--launch", "srun", "--time", "10", "--out", "job.sh"]
    written = subprocess.run(
        [str(hpcml), "jobscript", "cpu", *options, "--", "hello.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert written.returncode == 0, written.stderr
    text = (project / "job.sh").read_text()
    assert f"export SING_IMAGE={project}/images/cpu.sif\n" in text and "#SBATCH --time=10\n" in text
    log = submit / "job.log"
    submitted = twin.sbatch(submit, "--parsable", f"--output={log}", str(project / "job.sh"))
    assert submitted.returncode == 0, submitted.stderr
    state = wait_for(submitted.stdout.strip().split(";")[0], twin.cluster.env, timeout=300)
    output = log.read_text() if log.exists() else ""
    assert state == ("COMPLETED", "0:0"), output[-4000:]
    ranks = re.findall(rf"^rank (\d) of 2: {project}/hello.py in {submit} torch \S+ /opt/venv$", output, re.M)
    assert sorted(ranks) == ["0", "1"], output[-4000:]


def test_the_representative_runs_are_runs_of_the_full_matrix():
    for site, runs in REPRESENTATIVE_RUNS.items():
        assert set(runs) <= set(FEWER_RUNS.get(site, [(n, launch) for n in (1, 2) for launch in LAUNCHES])), site
    assert set(REPRESENTATIVE_RUNS) == set(SITES)
    shapes_run = {run for runs in REPRESENTATIVE_RUNS.values() for run in runs}
    assert shapes_run == {(n, launch) for n in (1, 2) for launch in LAUNCHES}
