"""`pip install .` (not editable) in a fresh venv gives a builder that renders, checks and
publishes on its own: templates, schemas, the wrapper and the runtime's source ship inside it."""

import os
import shutil
import subprocess
import sys

import pytest

from builder.render import runtime_wheel
from conftest import CONTAINERS, RECIPES, ROOT


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv with the project installed from this checkout as a user would."""
    venv = tmp_path_factory.mktemp("pkg") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    result = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(ROOT)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return venv / "bin" / "hpcml"


def hpcml(command, *args, cwd, env=None):
    # no PYTHONPATH: the installed package, never this checkout's source
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(command), *map(str, args)], cwd=cwd, env=dict(clean, **(env or {})),
                          capture_output=True, text=True, timeout=300)


def test_version(installed, tmp_path):
    result = hpcml(installed, "--version", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "hpc-ml-containers 0.1.0"


def test_the_installed_builder_renders_what_the_checkout_does(installed, tmp_path):
    shutil.copytree(RECIPES, tmp_path / "recipes")
    result = hpcml(installed, "render", "--all", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for path in CONTAINERS.glob("*.def"):
        assert (tmp_path / "containers" / path.name).read_text() == path.read_text(), path.name
    for path in (ROOT / "wrappers" / "sites").glob("*.sh"):
        assert (tmp_path / "wrappers" / "sites" / path.name).read_text() == path.read_text()
    # the runtime wheel built from the installed copy of runtime/ has the very same bytes
    wheels = list((tmp_path / "containers").glob("*.whl"))
    checkout = runtime_wheel.current()
    assert [w.name for w in wheels] == [checkout.name] and wheels[0].read_bytes() == checkout.data
    result = hpcml(installed, "check", cwd=tmp_path)
    assert result.returncode == 0 and "up to date" in result.stdout, result.stderr


def test_the_installed_builder_publishes_a_module_with_its_wrapper(installed, tmp_path, cpu_image, apptainer):
    shutil.copytree(RECIPES, tmp_path / "recipes")
    prefix = tmp_path / "appl"
    result = hpcml(installed, "publish", "cpu", "--images", cpu_image.parent, "--prefix", prefix,
                   "--version", "pkg", "--skip-smoke", cwd=tmp_path, env={"HPCML_APPTAINER": apptainer})
    assert result.returncode == 0, result.stderr
    wrapper = prefix / "pytorch" / "pkg" / "bin" / "singularity_wrapper"
    ran = subprocess.run([str(wrapper), "exec", "python", "-c", "import launchenv, smoke; print('ok')"],
                         env=dict(os.environ, SING_IMAGE=str(prefix / "pytorch" / "pkg" / "image.sif"),
                                  HPCML_APPTAINER=apptainer),
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and ran.stdout == "ok\n", ran.stderr
