"""`doctor` with the runner swapped for a fake: what it says of the Apptainer it finds, and of
one that does not answer, without Apptainer on the machine."""

import os

import pytest
from conftest import RECIPES
from helpers.fake_runner import FakeRunner

from builder import runner
from builder.errors import ToolError
from builder.host import route_facts
from builder.recipes.tree import RecipeTree
from builder.run import doctor


@pytest.fixture
def found(monkeypatch):
    """Where Apptainer is, as the host's facts read it; the list holds each lookup's site."""
    lookups = []

    def installed(site):
        lookups.append(site)
        return "/opt/fake/bin/apptainer"

    monkeypatch.setattr(route_facts, "installed_apptainer", installed)
    return lookups


def test_the_apptainer_found_is_named_with_its_version(found, monkeypatch, tmp_path, capsys):
    fake = FakeRunner(monkeypatch, answers={"apptainer": "apptainer version 1.4.5\n"})
    doctor.report(RecipeTree(RECIPES), tmp_path)
    out = capsys.readouterr().out
    assert "apptainer             /opt/fake/bin/apptainer: apptainer version 1.4.5" in out
    assert ["/opt/fake/bin/apptainer", "--version"] in fake.commands
    assert "disk images" in out and "fakeroot" in out
    assert len(found) == 1  # the apptainer row and the build route share one reading


def test_an_apptainer_that_fails_is_reported_broken_not_raised(found, monkeypatch, tmp_path, capsys):
    FakeRunner(monkeypatch)

    def refuses(argv, **kwargs):
        raise ToolError(f"{argv[0]} --version failed (exit 1)")

    monkeypatch.setattr(runner, "run", refuses)
    doctor.report(None, tmp_path)
    out = capsys.readouterr().out
    assert "/opt/fake/bin/apptainer: broken (/opt/fake/bin/apptainer --version failed (exit 1))" in out
    assert "recipes               none here" in out


def test_the_emulator_for_the_recipes_other_architecture_is_shown(found, monkeypatch, tmp_path, capsys):
    from builder.host import emulation

    FakeRunner(monkeypatch, answers={"apptainer": "apptainer version 1.4.5\n"})
    monkeypatch.setattr(emulation, "host_arch", lambda: "x86_64")
    monkeypatch.setattr(emulation, "state", lambda arch: ("missing", f"no QEMU user-mode emulator for {arch}: ..."))
    doctor.report(RecipeTree(RECIPES), tmp_path)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("emulation")]
    assert rows == ["emulation aarch64     no QEMU user-mode emulator for aarch64: ..."]  # gh200-cuda's


def test_the_x86_64_compilers_for_the_other_architecture_are_shown(found, monkeypatch, tmp_path, capsys):
    from builder.host import cross_tools, emulation

    FakeRunner(monkeypatch, answers={"apptainer": "apptainer version 1.4.5\n"})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(emulation, "host_arch", lambda: "x86_64")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    doctor.report(RecipeTree(RECIPES), tmp_path)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("compilers")]
    assert rows == ["compilers aarch64     not made yet: the first build of such an image makes them (about a minute)"]
    made = tmp_path / "cache/hpc-ml-containers/cross/aarch64-0123456789abcdef"
    made.mkdir(parents=True)
    (made / cross_tools.READY).write_text("")
    assert cross_tools.state("aarch64") == f"made: {made}"
    monkeypatch.setattr(emulation, "host_arch", lambda: "aarch64")
    assert cross_tools.state("aarch64").startswith("not used")


def test_both_debian_mirrors_a_build_takes_are_shown_and_a_missing_one_said(found, monkeypatch, tmp_path, capsys):
    FakeRunner(monkeypatch, answers={"apptainer": "apptainer version 1.4.5\n"})
    monkeypatch.setenv("HPCML_MIRROR", "http://mirror.test/debian")
    monkeypatch.delenv("HPCML_SECURITY_MIRROR", raising=False)
    doctor.report(None, tmp_path)
    out = capsys.readouterr().out
    assert "mirror                http://mirror.test/debian\n" in out
    assert "security mirror       http://mirror.test/debian-security\n" in out
    monkeypatch.setenv("HPCML_MIRROR", "http://mirror.test/other")
    doctor.report(None, tmp_path)
    assert "security mirror       no Debian security mirror known beside http://mirror.test/other; set " in (
        capsys.readouterr().out
    )
