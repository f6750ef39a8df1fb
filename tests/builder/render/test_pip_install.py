"""render/pip_install.py: a block's pip install from the target's lock (nothing resolved at
build time), as asked without one, and refused in one line when the lock is stale."""

import dataclasses
import re
import shutil

import pytest
from conftest import CONTAINERS, RECIPES
from helpers.cli_here import run_here
from helpers.mini_target import mini_target

from builder import lockfile
from builder.errors import RecipeError
from builder.render.blocks import parts_by_layer
from builder.render.pip_install import Recorder, Request, lines

HASH = "ab" * 32
LOCK = lockfile.PythonLock(
    "mini",
    "3.11",
    "x86_64-manylinux_2_36",
    (lockfile.Step("extras", "numpy==2.4.6", (lockfile.Pinned("numpy", "2.4.6", (HASH,)),)),),
    "recipes/locks/mini/python.txt",
)


def test_without_a_lock_the_line_is_the_pip_install_it_always_was(tree):
    target = mini_target(tree)
    assert lines(target, Request("extras", ("numpy==2.4.6",))) == ["pip install --no-cache-dir numpy==2.4.6"]
    request = Request("mpi", ("mpi4py==4.1.2",), ("--only-binary=mpi4py",))
    assert lines(target, request, tail='"$@"') == ['pip install --no-cache-dir --only-binary=mpi4py mpi4py==4.1.2 "$@"']


def test_with_a_lock_pip_installs_exactly_the_steps_pins_and_checks_each_hash(tree):
    target = dataclasses.replace(mini_target(tree), python_lock=LOCK)
    shown = lines(target, Request("extras", ("numpy==2.4.6",)))
    assert shown[1:4] == ["cat > \"$lock\" <<'PIP_LOCK'", f"numpy==2.4.6 --hash=sha256:{HASH}", "PIP_LOCK"]
    assert shown[4] == 'pip install --no-cache-dir --no-deps --require-hashes -r "$lock"'


@pytest.mark.parametrize(
    "request_, made_for",
    [
        (Request("extras", ("numpy==2.5.0",)), "was made for 'numpy==2.4.6'"),
        (Request("frameworks", ("lightning==2.6.6",)), "has no such step"),
    ],
)
def test_a_step_that_asks_for_something_else_than_the_lock_is_one_line_naming_the_fix(tree, request_, made_for):
    target = dataclasses.replace(mini_target(tree), python_lock=LOCK)
    with pytest.raises(RecipeError) as caught:
        lines(target, request_)
    message = str(caught.value)
    assert message.startswith("recipes/locks/mini/python.txt: the lock is stale: step ")
    assert made_for in message and message.endswith("refresh it with: hpcml lock mini")


def test_the_recorder_hears_every_pip_step_of_the_cpu_target_in_install_order(tree):
    recorder = Recorder()
    parts_by_layer(dataclasses.replace(tree.target("cpu"), python_lock=recorder))
    assert [r.step for r in recorder.requests] == ["python", "torch", "mpi", "extras", "deepspeed", "frameworks"]
    assert recorder.requests[1].asked() == "torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu"


def test_every_pip_install_of_a_locked_definition_resolves_nothing():
    """The runtime wheel (ours, by its sha256) and DeepSpeed's own compiled wheel (its sdist
    checked against the lock) are the two installs not read from a lock file."""
    for path in CONTAINERS.glob("cpu*.def"):
        for line in path.read_text().splitlines():
            if line.lstrip().startswith("pip install"):
                assert "--no-deps" in line, f"{path.name}: {line}"
                assert "--require-hashes" in line or re.search(r"--no-index|deepspeed-\*\.whl", line), line


@pytest.mark.parametrize(
    "old, new, stale_step",
    [
        ("  numpy: 2.4.6\n", "  numpy: 2.4.7\n", "extras"),
        ("  lightning: 2.6.6\n", "  lightning: 2.6.7\n", "frameworks"),
    ],
)
def test_a_moved_pin_refuses_render_and_check_in_one_line_and_writes_nothing(tmp_path, old, new, stale_step):
    recipes = shutil.copytree(RECIPES, tmp_path / "recipes")
    versions = recipes / "versions.yaml"
    assert old in versions.read_text()
    versions.write_text(versions.read_text().replace(old, new))
    result = run_here("render", "cpu", "--recipes", recipes, "--out", tmp_path / "out")
    assert result.returncode == 2, result.stderr
    assert f"the lock is stale: step {stale_step} asks for" in result.stderr
    assert result.stderr.strip().endswith("refresh it with: hpcml lock cpu") and result.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()
    result = run_here("check", "--recipes", recipes, "--out", CONTAINERS, "--sites-out", tmp_path / "sites")
    assert result.returncode == 2 and "the lock is stale" in result.stderr


def test_a_target_whose_lock_is_gone_renders_as_it_asks(tmp_path):
    recipes = shutil.copytree(RECIPES, tmp_path / "recipes")
    shutil.rmtree(recipes / "locks" / "cpu")
    result = run_here("render", "cpu", "--recipes", recipes, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "pip install --no-cache-dir numpy==2.4.6 matplotlib==3.11.2" in (tmp_path / "out" / "cpu.def").read_text()
