"""A project env as a researcher makes and uses one (issue 77), with real PyPI packages: a pure
one, one with a compiled wheel (orjson) and one that pulls an sdist built in the image
(hydra-core's antlr4 runtime). Locked against the CPU image, built by root and again by an
ordinary user on the login twin with the site's Apptainer (the same bytes), imported through
the wrapper with the image's own accelerate unchanged, and on every rank of a two-node job
that `jobscript --pyenv` wrote. A requirement that would move an image pin stops at the lock.
Real packages from the host's pip sources and a user's own set-up: `make test-full` runs it."""

import hashlib
import json
import shutil
import subprocess
import time

import pytest
from conftest import ROOT, run_builder
from helpers import site_login
from helpers.slurm_jobs import job_env, run_batch

from builder import lockfile, pyenv_lock
from builder.host import hostinfo

pytestmark = pytest.mark.full

WRAPPER = ROOT / "wrappers" / "singularity_wrapper"
REQUIREMENTS = "hydra-core==1.3.2\norjson==3.13.0\ntabulate>=0.9\neinops\n"  # einops: the image's
IMPORTS = "import hydra, omegaconf, orjson, tabulate, accelerate; print(accelerate.__version__, hydra.__version__)"
RANKS = """import json, os, socket
import hydra, orjson, accelerate
print("pyenv-rank " + json.dumps({"rank": int(os.environ["SLURM_PROCID"]), "host": socket.gethostname(),
    "hydra": hydra.__version__, "orjson": orjson.__version__, "accelerate": accelerate.__version__}), flush=True)
"""
USER_SCRIPT = """set -eu
[ "$(id -u)" != 0 ]
git clone -q "$HOME/hpc-ml-containers.git" hpc
cd hpc
make setup > /dev/null
started=$(date +%s)
.venv/bin/hpcml env build cpu "$HOME/project/requirements.cpu.lock" --images "$HOME/images" \\
    --out "$HOME/project/user.sqsh"
echo "user build: $(( $(date +%s) - started )) s"
SING_IMAGE="$HOME/images/cpu.sif" SING_PYENV="$HOME/project/user.sqsh" wrappers/singularity_wrapper exec \\
    python -c "$IMPORTS"
"""


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def project(cpu_image, apptainer, tmp_path_factory):
    """A project folder with the requirements, their lock and the env root built."""
    folder = tmp_path_factory.mktemp("project")
    (folder / "requirements.txt").write_text(REQUIREMENTS)
    started = time.monotonic()
    locked = run_builder("env", "lock", "cpu", folder / "requirements.txt", timeout=600)
    assert locked.returncode == 0, locked.stderr
    built = run_builder(
        "env",
        "build",
        "cpu",
        folder / "requirements.cpu.lock",
        "--images",
        cpu_image.parent,
        timeout=1800,
        env={"HPCML_APPTAINER": apptainer},
    )
    assert built.returncode == 0, built.stderr
    print(f"\nenv locked and built in {time.monotonic() - started:.0f} s:\n{built.stderr}")
    return folder


def test_the_lock_holds_the_wheels_and_the_sdist_the_image_lacks_and_nothing_it_holds(project):
    lock = pyenv_lock.load(project / "requirements.cpu.lock")
    files = {pin.name: pin.files for pin in lock.pins}
    assert {"hydra-core", "omegaconf", "antlr4-python3-runtime", "orjson", "tabulate"} <= set(files)
    assert files["antlr4-python3-runtime"] == ("antlr4-python3-runtime-4.9.3.tar.gz",)  # built in the image
    assert any("cp311" in name and "manylinux" in name for name in files["orjson"])
    image = {p.name for step in lockfile.load(ROOT / "recipes", "cpu").steps for p in step.pins}
    assert "einops" in image and not image & set(files)


def test_a_requirement_that_would_move_an_image_pin_stops_at_the_lock(project):
    (project / "old.txt").write_text("tabulate\naccelerate==1.0.0\n")
    result = run_builder("env", "lock", "cpu", project / "old.txt")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: {project}/old.txt:2: accelerate==1.0.0: the image holds accelerate ")
    assert not (project / "old.cpu.lock").exists()


def test_an_ordinary_user_builds_the_same_env_file_and_imports_it_with_the_images_accelerate(project, cpu_image):
    box = site_login.ready()
    home = site_login.user_home()
    try:
        site_login.clone_for(home)
        (home / "images").mkdir()
        shutil.copy(cpu_image, home / "images" / "cpu.sif")
        shutil.copytree(project, home / "project", ignore=shutil.ignore_patterns("*.sqsh", "*.json"))
        subprocess.run(["chown", "-R", f"{site_login.UID}:{site_login.UID}", home], check=True)
        done = site_login.run_as_user(
            box, home, USER_SCRIPT, env={"IMPORTS": IMPORTS}, binds=hostinfo.pip_settings()["find_links"], timeout=1800
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
        pins = {p.name: p.version for s in lockfile.load(ROOT / "recipes", "cpu").steps for p in s.pins}
        assert done.stdout.splitlines()[-1] == f"{pins['accelerate']} 1.3.2", done.stdout
        print(next(line for line in done.stdout.splitlines() if line.startswith("user build")))
        assert sha256(home / "project" / "user.sqsh") == sha256(project / "requirements.cpu.sqsh")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_every_rank_of_a_two_node_job_from_jobscript_pyenv_imports_the_env(
    project, two_nodes, site_file, apptainer, cpu_image, tmp_path
):
    program = tmp_path / "ranks.py"
    program.write_text(RANKS)
    script = tmp_path / "job.sh"
    written = run_builder(
        "jobscript", "cpu", "--site", "local", "--nodes", "2", "--tasks-per-node", "2", "--launch", "srun",
        "--time", "00:10:00", "--image", cpu_image, "--wrapper", WRAPPER,
        "--pyenv", project / "requirements.cpu.sqsh", "--out", script, "--", program,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    *state, output = run_batch(script, job_env(two_nodes, site_file, apptainer), tmp_path, tmp_path / "job.log")
    assert state == ["COMPLETED", "0:0"], output[-6000:]
    ranks = sorted(
        (json.loads(line.split(" ", 1)[1]) for line in output.splitlines() if line.startswith("pyenv-rank ")),
        key=lambda rank: rank["rank"],
    )
    accelerate = {p.name: p.version for s in lockfile.load(ROOT / "recipes", "cpu").steps for p in s.pins}["accelerate"]
    assert [(r["rank"], r["host"], r["hydra"], r["orjson"], r["accelerate"]) for r in ranks] == [
        (0, "n1", "1.3.2", "3.13.0", accelerate),
        (1, "n1", "1.3.2", "3.13.0", accelerate),
        (2, "n2", "1.3.2", "3.13.0", accelerate),
        (3, "n2", "1.3.2", "3.13.0", accelerate),
    ], output[-4000:]
