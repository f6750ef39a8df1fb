"""The lowest Python the project claims is one number everywhere (issue 51): pyproject's
requires-python, ruff's target-version, the builder's own start-up check and the README. And
CI runs the tests under exactly that Python, so a 3.12-only construct cannot slip in unseen
(the builder uses tomllib and datetime.UTC, both new in 3.11)."""

import os
import re
import sys
import tomllib

import pytest
from conftest import ROOT

from builder import interpreter


def claimed():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    floor = re.fullmatch(r">=(\d+)\.(\d+)", project["project"]["requires-python"])
    ruff = re.fullmatch(r"py(\d)(\d+)", project["tool"]["ruff"]["target-version"])
    return tuple(map(int, floor.groups())), tuple(map(int, ruff.groups()))


def test_pyproject_ruff_the_startup_check_and_the_readme_name_one_floor():
    requires, ruff_target = claimed()
    assert requires == ruff_target == interpreter.MIN_PYTHON
    said = f"Python {requires[0]}.{requires[1]} or newer"
    assert said in (ROOT / "README.md").read_text()
    assert said in (ROOT / "docs" / "troubleshooting.md").read_text()
    # make setup's check, before it makes the venv
    assert f"sys.version_info < {requires}" in (ROOT / "Makefile").read_text()
    assert f"is not {said};" in (ROOT / "Makefile").read_text()


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="CI's interpreter is the one that must sit on the floor")
def test_ci_runs_the_tests_under_the_lowest_python_claimed():
    assert sys.version_info[:2] == interpreter.MIN_PYTHON, (
        f"CI ran Python {sys.version.split()[0]}; the project claims {interpreter.MIN_PYTHON}: "
        "run CI under the floor or move the floor"
    )
