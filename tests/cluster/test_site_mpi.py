"""The CUDA images' own MPI under the launchers of the sites that run them (issue 47, point 5).

The CUDA targets are Debian trixie based and carry its Open MPI 5.0.7; the CPU image the site
twins otherwise run carries bookworm's 4.1.4. A hybrid launch pairs a launcher outside the
container with the MPI inside it, so the twins run the CUDA images' MPI here, in a small
stand-in image that holds exactly it (tests/helpers/trixie_mpi_image.py):

- Jean Zay: `srun --mpi=pmix` (its site file's slurm_mpi). Slurm's PMIx plugin, not a host
  Open MPI, serves the ranks; this machine's Slurm has PMIx 4.2, the image's client is 5.0.
- Karolina: the host's mpirun, from the module its site file names (mpi.host_module, an
  Open MPI of the images' 5.0 series). The twin's stand-in module holds an Open MPI 5.0 of
  another release (tests/helpers/open_mpi_wheel.py), as Karolina's 5.0.3 is to the images' 5.0.7.

Each run is the script `jobscript` writes, submitted unchanged on the site's twin, on one node
and on two: every rank reports the image's Open MPI, a correct all-reduce sum across all
ranks, and launchenv's ranks equal to MPI's. Why each site launches as it does, with sources:
the site files' comments and docs/jobscripts-sites.md ("Host and image MPI").
"""

import json
import re
import sys
import time

import pytest
from conftest import RECIPES, ROOT, run_builder
from helpers import site_twin
from helpers.slurm_jobs import NEEDS_TWO_NODES, wait_for

from builder.values.shell import leading_variable

TARGET = "a100-cuda"  # the CUDA target both sites run
EXAMPLE = str(ROOT / "examples" / "ddp_cnn.py")  # a program that exists, for the scripts not run
# Debian's Open MPI per suite (packages.debian.org, openmpi-bin: bookworm 4.1.4-3, trixie
# 5.0.7-1); the stand-in image's %test and the runs below check trixie's from inside
OPEN_MPI_SERIES = {"bookworm": "4.1", "trixie": "5.0"}
# what each rank writes beside the program: its view of MPI and of the launch
PROGRAM = """
import ctypes
import json
import os
import socket
import sys
from pathlib import Path

from mpi4py import MPI

comm = MPI.COMM_WORLD
pmix = ctypes.CDLL("libpmix.so.2")  # the image's, which its Open MPI loads
pmix.PMIx_Get_version.restype = ctypes.c_char_p
record = {
    "rank": comm.Get_rank(),
    "size": comm.Get_size(),
    "sum": comm.allreduce(comm.Get_rank() + 1, op=MPI.SUM),
    "node": socket.gethostname(),
    "library": MPI.Get_library_version().split(",")[0],
    # launchenv's, from the launcher's variables
    "launchenv": {name: os.environ.get(name) for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK")},
    # set by the PMIx server that wired the ranks up; OMPI_VERSION by an Open MPI 5 mpirun only
    "pmix_server": os.environ.get("PMIX_VERSION"),
    "pmix_client": pmix.PMIx_Get_version().decode().split()[1],  # "OpenPMIx 5.0.7a1 (...)"
    "mpirun": os.environ.get("OMPI_VERSION"),
}
Path(sys.argv[1], f"rank-{record['rank']}.json").write_text(json.dumps(record))
"""


def series(version: str) -> str:
    """'5.0' of 'OpenMPI/5.0.3-GCC-13.3.0', 'OpenMPI 5.0' or 'Open MPI v5.0.7'."""
    found = re.search(r"(\d+)\.(\d+)", version)
    assert found, version
    return f"{found.group(1)}.{found.group(2)}"


def image_series(tree, target) -> str:
    final = next(stage for stage in tree.target(target).stages if stage.name == "final")
    return OPEN_MPI_SERIES[final.image]


def test_karolinas_mpirun_script_loads_the_open_mpi_of_the_images_series(tree):
    """The module line of Karolina's `--launch mpirun` script names the Open MPI 5.0 module the
    site file decides, not the unversioned `OpenMPI` it named before (4.1 there: 5.0 ranks started
    by another major series' mpirun); the other launch modes load no MPI."""
    from builder.run import jobscript

    site = tree.site("karolina")
    account = site.slurm.account.example
    plan = jobscript.plan(
        tree,
        TARGET,
        jobscript.Request(site="karolina", program=(EXAMPLE,), account=account, launch="mpirun", nodes=2),
    )
    text = jobscript.script(plan)
    assert re.findall(r"^module .*$", text, re.M) == ["module load OpenMPI/5.0.3-GCC-13.3.0"]
    assert series(site.mpi.host_module) == series(site.mpi.host) == image_series(tree, TARGET) == "5.0"
    assert re.search(r'^mpirun -np "\$SLURM_NTASKS" ', text, re.M), text
    plan = jobscript.plan(
        tree, TARGET, jobscript.Request(site="karolina", program=(EXAMPLE,), account=account, launch="srun")
    )
    assert not re.search(r"^module ", jobscript.script(plan), re.M)


def test_every_host_mpirun_a_site_loads_is_of_its_images_series(tree):
    """Where a site's scripts start the ranks with the host's mpirun from a module (slurm_mpi:
    none), that module's Open MPI is of the series of every image built for the site."""
    checked = []
    for name in tree.sites:
        site = tree.site(name)
        if site.mpi.slurm_mpi != "none" or not site.mpi.host_module:
            continue
        for target in tree.targets:
            built = tree.target(target)
            if name in [each.name for each in built.sites] and built.mpi.abi == "openmpi":
                assert series(site.mpi.host_module) == image_series(tree, target), (name, target)
                checked.append((name, target))
    assert ("karolina", TARGET) in checked


# --- on the twins -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trixie_mpi(apptainer):
    from helpers import trixie_mpi_image

    return trixie_mpi_image.ready(apptainer)


@pytest.fixture(scope="module")
def host_open_mpi():
    from helpers import open_mpi_wheel

    return open_mpi_wheel.bin_dir()


@pytest.fixture(scope="module", params=["jean-zay", "karolina"])
def mpi_twin(request, tmp_path_factory, apptainer):
    """The site's twin (tests/helpers/site_twin.py) whose host MPI module, where the site file
    names one, holds an Open MPI 5.0; and the shell a user submits from."""
    from helpers.site_twin import Twin
    from helpers.twonode_cluster import TwoNodes

    from builder.recipes.tree import RecipeTree

    class OpenMpi5Twin(Twin):
        def modulefiles(self):
            folder = super().modulefiles()
            if self.site.mpi.host_module:  # the same module name, an Open MPI 5.0 in it
                host_open_mpi = request.getfixturevalue("host_open_mpi")
                self._module(
                    folder,
                    self.site.mpi.host_module,
                    prepend={"PATH": str(host_open_mpi)},
                    setenv={"HPCML_TWIN_HOST_MPI": self.site.mpi.host_module},
                )
            return folder

    site = RecipeTree(RECIPES).site(request.param)
    root = tmp_path_factory.mktemp(f"mpi-twin-{site.name}")
    model = OpenMpi5Twin(site, root / "site", apptainer)
    cluster = TwoNodes(root / "cluster", twin=model)
    try:
        cluster.start()
        yield model, cluster, login_env(model, cluster)
    finally:
        cluster.stop()


def login_env(model, cluster) -> dict:
    """A login shell of the twin (helpers/site_twin.py), and the checkout's runtime (launchenv)
    on the container's PYTHONPATH, which the stand-in image lacks (the jobs bind it)."""
    runtime = str(ROOT / "runtime")
    return {
        **site_twin.login_env(model, cluster),
        "APPTAINERENV_PYTHONPATH": runtime,
        "SINGULARITYENV_PYTHONPATH": runtime,
    }


@NEEDS_TWO_NODES
@pytest.mark.cluster
@pytest.mark.parametrize("nodes", [1, 2])
def test_the_images_open_mpi_runs_under_the_sites_launcher(mpi_twin, trixie_mpi, tmp_path, nodes):
    model, cluster, env = mpi_twin
    site = model.site
    # the stand-in under the image's name, where the site runs images from
    folder = model.image_dir() if site.runtime.image_dir else tmp_path / "images"
    folder.mkdir(parents=True, exist_ok=True)
    image = folder / f"{TARGET}.sif"
    if not image.exists():
        image.symlink_to(trixie_mpi)
    where = f"${leading_variable(site.runtime.image_dir)}/{TARGET}.sif" if site.runtime.image_dir else str(image)
    program = tmp_path / "mpi_allreduce.py"
    program.write_text(PROGRAM)
    script = tmp_path / "job.sh"
    account = ("--account", site.slurm.account.example) if site.slurm.account else ()
    written = run_builder(
        *("jobscript", TARGET, "--site", site.name, *account, "--launch", "mpirun", "--nodes", nodes, "--gpus", 2),
        *("--time", "00:10:00", "--image", where, "--bind", ROOT / "runtime", "--out", script),
        *("--", program, tmp_path),
    )
    assert written.returncode == 0, written.stderr
    text = script.read_text()
    if site.mpi.slurm_mpi == "none":
        assert f"module load {site.mpi.host_module}\n" in text and "\nmpirun " in text
    else:
        assert f"--mpi={site.mpi.slurm_mpi} " in text and "\nmpirun " not in text
    log = tmp_path / "job.log"
    started = time.monotonic()
    submitted = site_twin.sbatch(env, tmp_path, "--parsable", f"--output={log}", script)
    assert submitted.returncode == 0, submitted.stderr
    state = wait_for(submitted.stdout.strip().split(";")[0], cluster.env, timeout=300)
    output = log.read_text() if log.exists() else ""
    print(f"\n{site.name} on {nodes} node(s): sbatch to job end {time.monotonic() - started:.1f} s", file=sys.stderr)
    assert state == ("COMPLETED", "0:0"), output[-6000:]
    ranks = 2 * nodes
    records = [json.loads((tmp_path / f"rank-{rank}.json").read_text()) for rank in range(ranks)]
    print(json.dumps(records[0]), file=sys.stderr)
    for rank, record in enumerate(records):
        assert record["library"].startswith("Open MPI v5.0."), record  # the image's
        assert (record["size"], record["sum"]) == (ranks, ranks * (ranks + 1) // 2), record
        assert record["launchenv"]["RANK"] == str(rank) and record["launchenv"]["WORLD_SIZE"] == str(ranks), record
        # a PMIx server of another version than the image's client wired the ranks up
        assert record["pmix_server"] and record["pmix_server"] != record["pmix_client"], record
    assert sorted({record["node"] for record in records}) == ["n1", "n2"][:nodes]
    launchers = {record["mpirun"] for record in records}
    if site.mpi.slurm_mpi == "none":
        # the module's mpirun (PRRTE), of the image's series and another release than its 5.0.7
        from helpers import open_mpi_wheel

        assert launchers == {open_mpi_wheel.VERSION} and series(open_mpi_wheel.VERSION) == "5.0", records[0]
        assert records[0]["library"] != f"Open MPI v{open_mpi_wheel.VERSION}", "the same release: nothing mixed"
    else:
        assert launchers == {None}, records[0]  # Slurm's own PMIx server, no Open MPI launcher
