"""`doctor` with the runner swapped for a fake: what it says of the runtime it finds, and of
one that does not answer, without Apptainer on the machine."""

import pytest
from conftest import RECIPES
from helpers.fake_runner import FakeRunner

from builder import runner
from builder.errors import ToolError
from builder.recipes.tree import RecipeTree
from builder.run import doctor


@pytest.fixture
def found(monkeypatch):
    monkeypatch.setattr(doctor, "installed_apptainer", lambda site: "/opt/fake/bin/apptainer")


def test_the_runtime_found_is_named_with_its_version(found, monkeypatch, tmp_path, capsys):
    fake = FakeRunner(monkeypatch, answers={"apptainer": "apptainer version 1.4.5\n"})
    doctor.report(RecipeTree(RECIPES), tmp_path)
    out = capsys.readouterr().out
    assert "runtime               /opt/fake/bin/apptainer: apptainer version 1.4.5" in out
    assert ["/opt/fake/bin/apptainer", "--version"] in fake.commands
    assert "disk images" in out and "fakeroot" in out


def test_a_runtime_that_fails_is_reported_broken_not_raised(found, monkeypatch, tmp_path, capsys):
    FakeRunner(monkeypatch)

    def refuses(argv, **kwargs):
        raise ToolError(f"{argv[0]} --version failed (exit 1)")

    monkeypatch.setattr(runner, "run", refuses)
    doctor.report(None, tmp_path)
    out = capsys.readouterr().out
    assert "/opt/fake/bin/apptainer: broken (/opt/fake/bin/apptainer --version failed (exit 1))" in out
    assert "recipes               none here" in out
