"""The frameworks block's pins, with the real pip and no image: the very lines the block
renders run under sh in a fresh venv, on tiny wheels written here, pip never reaching an index
(PIP_NO_INDEX, PIP_FIND_LINKS). A framework that needs another version of a package the layers
below pinned fails in one marked line, which the layer build reports (build_log.failure_line),
and moves nothing; one content with the pins installs, and the image's %test lines pass, until a pin moves.
About a second each; the venv's packages are copied from one venv made per run."""

import base64
import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from conftest import RECIPES, ROOT, run_lock

from builder import contract
from builder.layerbuild.build_log import failure_line
from builder.recipes.tree import RecipeTree
from builder.render.blocks import frameworks

PIP_TIMEOUT_S = 120


def write_wheel(folder, name, version, requires=(), tag="py3-none-any"):
    """A pure-Python wheel of one empty module, as pip wants it (METADATA, WHEEL, RECORD).
    ``tag``: what its WHEEL file claims; its file name always says py3-none-any."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"__version__ = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {requirement}\n" for requirement in requires),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: " + tag + "\n",
    }
    record = []
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            data = text.encode()
            wheel.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        wheel.writestr(f"{dist}/RECORD", "\n".join([*record, f"{dist}/RECORD,,"]) + "\n")


def site_packages(venv):
    (found,) = (venv / "lib").glob("python3*/site-packages")
    return found


def write_wheels(folder):
    folder.mkdir(exist_ok=True)
    write_wheel(folder, "fakenum", "1.0")
    write_wheel(folder, "fakenum", "2.0")
    write_wheel(folder, "fakeframe", "1.0", ["fakenum>=2"])  # would move the pin
    write_wheel(folder, "fakeok", "1.0", ["fakenum>=1"])  # content with it


def pip_environment(venv, wheels):
    """Its bin first on PATH, pip on the wheels here only."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PIP_", "PYTHON"))}
    env.update(
        PATH=f"{venv}/bin:{env['PATH']}",
        VIRTUAL_ENV=str(venv),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheels),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONPATH=str(ROOT / "runtime"),  # the image's runtime wheel, for smoke.pins
    )
    return env


@pytest.fixture(scope="session")
def lower_packages(tmp_path_factory):
    """What the layers below leave in a venv's site-packages: a fresh venv's own (pip, and
    setuptools where the Python bundles it) and fakenum 1.0, installed by that pip. Made once
    per run, also when pytest-xdist's workers share the tests (the first makes it, the others
    wait on the lock), as `python -m venv` and pip cost seconds."""
    with run_lock(tmp_path_factory, "frameworks-venv") as folder:
        if not (folder / "done").exists():
            shutil.rmtree(folder / "venv", ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", folder / "venv"], check=True, timeout=PIP_TIMEOUT_S)
            write_wheels(folder / "wheels")
            pip(pip_environment(folder / "venv", folder / "wheels"), "install", "fakenum==1.0")
            (folder / "done").touch()
    return site_packages(folder / "venv")


@pytest.fixture
def lower(tmp_path, lower_packages):
    """(venv, environment): a fresh venv holding fakenum 1.0, as the layers below left it,
    and the environment its lines run in. The venv is made without pip and given a copy of
    ``lower_packages``, with `pip` its own `python -m pip`: what a fresh venv and one pip
    install hold, at a tenth of the cost."""
    wheels = tmp_path / "wheels"
    write_wheels(wheels)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=PIP_TIMEOUT_S)
    shutil.copytree(lower_packages, site_packages(venv), dirs_exist_ok=True, symlinks=True)
    (venv / "bin" / "pip").write_text(f'#!/bin/sh\nexec "{venv}/bin/python" -m pip "$@"\n')
    (venv / "bin" / "pip").chmod(0o755)
    return venv, pip_environment(venv, wheels)


def pip(env, *args):
    return subprocess.run(["pip", *args], env=env, check=True, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)


def block_parts(venv, framework, mistagged=()):
    """The frameworks block's Parts for a cpu target whose one framework is ``framework``
    1.0, with its venv here (and python.mistagged ``mistagged``)."""
    target = RecipeTree(RECIPES).target("cpu")
    python = dataclasses.replace(target.python, frameworks=((framework, "1.0"),), venv=str(venv), mistagged=mistagged)
    # as a target without a lock installs them: pip resolves under the constraints
    build, final = frameworks.parts(dataclasses.replace(target, python=python, python_lock=None))
    return build, final


def run_lines(lines, env):
    """Lines as %post runs them: sh with -x (Apptainer traces them), after `set -eu`."""
    script = "set -eu\n" + "\n".join(lines) + "\n"
    return subprocess.run(
        ["sh", "-xc", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300
    )


def installed(env):
    """{name: version} of what the venv holds, as `pip list` shows it, read without starting pip."""
    code = "import importlib.metadata as m\nfor d in m.distributions(): print(d.metadata['Name'], d.version)"
    listing = subprocess.run(["python", "-c", code], env=env, check=True, capture_output=True, text=True, timeout=60)
    return dict(line.split(" ", 1) for line in listing.stdout.splitlines())


def image_checks(final):
    """The %test lines of the block that need no image: pip check and the pins held."""
    return [line for line in final.test if "smoke.imports" not in line]


def test_a_framework_that_would_move_a_pin_fails_in_one_marked_line_and_moves_nothing(lower):
    venv, env = lower
    build, _ = block_parts(venv, "fakeframe")
    result = run_lines(build.post, env)
    assert result.returncode != 0, result.stdout
    assert "The user requested (constraint) fakenum==1.0" in result.stdout  # pip's reasons, above
    marked = [line for line in result.stdout.splitlines() if line.startswith(contract.FAILURE_MARKER)]
    assert len(marked) == 1, result.stdout
    reason = failure_line(result.stdout)  # as the layer build reads its log
    assert reason == marked[0][len(contract.FAILURE_MARKER) :]
    assert "(fakenum==1.0)" in reason and "pip refused to move them" in reason
    held = installed(env)
    assert held["fakenum"] == "1.0" and "fakeframe" not in held
    assert (venv / frameworks.CONSTRAINTS).read_text().splitlines().count("fakenum==1.0") == 1


def test_a_framework_content_with_the_pins_installs_and_the_images_checks_pass(lower):
    venv, env = lower
    build, final = block_parts(venv, "fakeok")
    result = run_lines(build.post, env)
    assert result.returncode == 0, result.stdout
    assert failure_line(result.stdout) is None
    assert installed(env)["fakeok"] == "1.0"
    constraints = (venv / frameworks.CONSTRAINTS).read_text().splitlines()
    # what the venv held before, pip and setuptools too, each an exact pin
    assert "fakenum==1.0" in constraints and any(line.startswith("pip==") for line in constraints)
    assert all("==" in line and " " not in line for line in constraints)
    checks = run_lines(image_checks(final), env)
    assert checks.returncode == 0, checks.stdout
    assert "No broken requirements found." in checks.stdout
    assert f"pins: {len(constraints)} pins of the layers below unmoved" in checks.stdout
    # a later step that ignored the constraints: the pin check names what moved, and fails
    pip(env, "install", "fakenum==2.0")
    held = run_lines([line for line in final.test if frameworks.CONSTRAINTS in line], env)
    assert held.returncode == 1, held.stdout
    assert "pins: fakenum: pinned 1.0 by the layers below, found 2.0" in held.stdout.splitlines()


@pytest.fixture
def mistagged_wheel(lower, tmp_path):
    """``lower`` plus fakesbsa 1.0, whose WHEEL file says manylinux2014_sbsa (as NVIDIA's
    aarch64 nvidia-cusparselt-cu13 does) while its file name lets pip install it."""
    venv, env = lower
    write_wheel(tmp_path / "wheels", "fakesbsa", "1.0", tag="py3-none-manylinux2014_sbsa")
    pip(env, "install", "fakesbsa==1.0")
    # the pip a fresh venv gets here predates the tag check the images' pip makes, so `pip`
    # is the test runner's own (pip 26 here), run on that venv with --python
    shim = tmp_path / "newer-pip"
    shim.mkdir()
    (shim / "pip").write_text(f'#!/bin/sh\nexec {sys.executable} -m pip --python "{venv}/bin/python" "$@"\n')
    (shim / "pip").chmod(0o755)
    return venv, {**env, "PATH": f"{shim}:{env['PATH']}"}


def test_pip_check_calls_a_wheel_with_a_tag_it_does_not_know_unsupported(mistagged_wheel):
    # why the recipe key exists: real pip fails the plain check on such a wheel
    venv, env = mistagged_wheel
    _, final = block_parts(venv, "fakeok")
    checks = run_lines([line for line in image_checks(final) if "smoke.pins" not in line], env)
    assert checks.returncode == 1, checks.stdout
    assert "fakesbsa 1.0 is not supported on this platform" in checks.stdout


def test_the_image_check_lets_only_the_named_mistagged_wheels_line_through(mistagged_wheel):
    venv, env = mistagged_wheel
    _, final = block_parts(venv, "fakeok", mistagged=(("fakesbsa", "tagged sbsa"),))
    lines = [line for line in image_checks(final) if "smoke.pins" not in line]
    checks = run_lines(lines, env)
    assert checks.returncode == 0, checks.stdout
    assert "pip check: only the wheels whose tag pip misreads: fakesbsa" in checks.stdout.splitlines()
    # any other complaint still fails, and is what the log shows
    pip(env, "install", "--no-deps", "fakeframe==1.0")  # needs fakenum>=2; 1.0 is there
    broken = run_lines(lines, env)
    assert broken.returncode == 1, broken.stdout
    assert "fakeframe 1.0 has requirement fakenum>=2, but you have fakenum 1.0." in broken.stdout.splitlines()
