"""hpcml env build on the real CPU image, from a lock of the test's own wheels (helpers/
pip_sources.py: a wheel folder and an index on loopback that serves nothing): the env is one
squashfs file that the wrapper binds; its packages are imported by the env's python and by the
image's own (torchrun's workers run that one), the image's pins stay; a second build gives the
same bytes; an image it was not built for refuses it in one line. With real PyPI packages, as
an ordinary user on the login twin and on two Slurm nodes: tests/cluster/test_pyenv_jobs.py."""

import hashlib
import json
import os
import shutil
import subprocess

import pytest
from conftest import ROOT
from helpers.cli_here import run_here
from helpers.pip_sources import serve, wheel

from builder import lockfile

WRAPPER = ROOT / "wrappers" / "singularity_wrapper"


@pytest.fixture
def sources(tmp_path, monkeypatch):
    yield from serve(tmp_path, monkeypatch)


@pytest.fixture
def env_lock(sources, tmp_path, monkeypatch):
    monkeypatch.setattr("builder.host.pip_indexes.indexes_down", lambda urls, progress=None: list(urls))
    wheel(sources, "alpha", "1.0", ["beta>=1", "numpy"])
    wheel(sources, "beta", "1.1")
    (tmp_path / "requirements.txt").write_text("alpha==1.0\n")
    locked = run_here("env", "lock", "cpu", tmp_path / "requirements.txt")
    assert locked.returncode == 0, locked.stderr
    return tmp_path / "requirements.cpu.lock"


def env_build(lock, images, apptainer, *options):
    result = run_here("env", "build", "cpu", lock, "--images", images, *options, env={"HPCML_APPTAINER": apptainer})
    assert result.returncode == 0, result.stderr
    return result


def wrap(*args, env):
    return subprocess.run([str(WRAPPER), *map(str, args)], env=env, capture_output=True, text=True, timeout=300)


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_env_goes_beside_the_image_and_its_packages_reach_both_pythons_with_the_pins_unmoved(
    cpu_image, apptainer, env_lock, tmp_path
):
    env_build(env_lock, cpu_image.parent, apptainer)
    out = tmp_path / "requirements.cpu.sqsh"
    record = json.loads(subprocess.run(["unsquashfs", "-cat", out, "hpcml-pyenv.json"], capture_output=True).stdout)
    assert record["distributions"] == [["alpha", "1.0"], ["beta", "1.1"]]  # numpy stays the image's
    assert record["target"] == "cpu" and record["lock_sha256"] == sha256(env_lock)
    sbom = json.loads((tmp_path / "requirements.cpu.sbom.json").read_text())
    assert [c["purl"] for c in sbom["components"]] == ["pkg:pypi/alpha@1.0", "pkg:pypi/beta@1.1"]
    pins = {p.name: p.version for s in lockfile.load(ROOT / "recipes", "cpu").steps for p in s.pins}
    env = dict(os.environ, SING_IMAGE=str(cpu_image), HPCML_APPTAINER=apptainer, SING_PYENV=str(out))
    code = (
        "import alpha, beta, numpy, accelerate, sys; print(sys.executable, numpy.__version__, accelerate.__version__)"
    )
    ran = wrap("exec", "python", "-c", code, env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["/opt/pyenv/bin/python", pins["numpy"], pins["accelerate"]]
    ran = wrap("exec", "/opt/venv/bin/python", "-c", "import alpha, beta; print(alpha.__file__)", env=env)
    assert (ran.returncode, ran.stdout) == (0, "/opt/pyenv/site-packages/alpha/__init__.py\n"), ran.stderr


def test_a_second_build_of_the_same_lock_on_the_same_image_gives_the_same_bytes(
    cpu_image, apptainer, env_lock, tmp_path
):
    env_build(env_lock, cpu_image.parent, apptainer)
    env_build(env_lock, cpu_image.parent, apptainer, "--out", tmp_path / "again" / "env.sqsh")
    first, second = tmp_path / "requirements.cpu.sqsh", tmp_path / "again" / "env.sqsh"
    assert sha256(first) == sha256(second)
    assert sha256(tmp_path / "requirements.cpu.sbom.json") != ""
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no work folder left


def test_an_image_the_env_was_not_built_for_refuses_it_in_one_line(
    cpu_image, tiny_image, apptainer, env_lock, tmp_path
):
    env_build(env_lock, cpu_image.parent, apptainer)
    marker = tmp_path / "ran"
    env = dict(
        os.environ,
        SING_IMAGE=str(tiny_image),
        HPCML_APPTAINER=apptainer,
        SING_PYENV=str(tmp_path / "requirements.cpu.sqsh"),
    )
    ran = wrap("exec", "touch", marker, env=dict(env, SING_BIND=str(tmp_path)))
    assert ran.returncode == 2 and not marker.exists()
    lines = [line for line in ran.stderr.splitlines() if not line.startswith(("WARNING", "INFO"))]
    assert len(lines) == 1 and lines[0].startswith(
        "error: singularity_wrapper: SING_PYENV: the env was built for another image (cpu, image distributions sha256 "
    ), ran.stderr


def test_a_target_without_a_lock_is_locked_against_what_its_built_image_holds(
    cpu_image, apptainer, sources, tmp_path, monkeypatch
):
    """LUMI's targets and a site's own image have no lock: the env is resolved against the
    distributions the built image holds (read by one exec), and built only on an image that
    still holds them. Here the CPU image, its lock taken away."""
    monkeypatch.setattr("builder.host.pip_indexes.indexes_down", lambda urls, progress=None: list(urls))
    recipes = shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    (recipes / "locks" / "cpu" / "python.txt").unlink()
    wheel(sources, "alpha", "1.0", ["numpy"])
    (tmp_path / "requirements.txt").write_text("alpha\n")
    common = ("--recipes", recipes, "--images", cpu_image.parent)
    env = {"HPCML_APPTAINER": apptainer}
    locked = run_here("env", "lock", "cpu", tmp_path / "requirements.txt", *common, env=env)
    assert locked.returncode == 0, locked.stderr
    lock = tmp_path / "requirements.cpu.lock"
    header = next(line for line in lock.read_text().splitlines() if line.startswith("# image: "))
    assert header.startswith("# image: cpu, python 3.11, x86_64-manylinux_2_36, image distributions sha256 ")
    assert [line.split("==")[0] for line in lock.read_text().splitlines() if "==" in line and line[0] != "#"] == [
        "alpha"
    ]
    built = run_here("env", "build", "cpu", lock, *common, env=env)
    assert built.returncode == 0, built.stderr
    lock.write_text(lock.read_text().replace(header, header[:-64] + "0" * 64))
    again = run_here("env", "build", "cpu", lock, *common, "--out", tmp_path / "stale.sqsh", env=env)
    assert again.returncode == 1 and not (tmp_path / "stale.sqsh").exists()
    assert "error: the image holds other distributions (sha256 " in again.stderr
    assert "than the one the lock was made against (000000000000); lock the requirements again" in again.stderr
