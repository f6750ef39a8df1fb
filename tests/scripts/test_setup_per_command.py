"""Set-up asks only for what a command needs (issue 51): `make build` sets up the builder's
Python environment and nothing from Debian; the test stack belongs to `make test` and its
relatives; a host without apt is told what is missing in its own terms; a Python below the
floor stops the set-up before a venv is made."""

import shutil
import subprocess

import pytest
from conftest import ROOT

from builder import interpreter

TEST_STACK = "scripts/ensure-debian-packages"


def dry_run(*targets):
    """What make would run (make -n), the venv counted as up to date."""
    result = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "-o", ".venv/.installed", *targets],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("target", ["build", "render", "doctor", "publish", "export", "show", "unit"])
def test_image_commands_install_no_debian_packages(target):
    assert TEST_STACK not in dry_run(target)


@pytest.mark.parametrize("target", ["test", "test-full", "test-heavy", "two-nodes"])
def test_the_test_commands_set_up_the_test_stack(target):
    assert TEST_STACK in dry_run(target)


def bare_path(tmp_path, *tools):
    """A PATH folder holding only ``tools`` (links to the host's): no apt-get unless named."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for tool in tools:
        (folder / tool).symlink_to(shutil.which(tool))
    return str(folder)


def test_a_host_without_apt_is_told_the_missing_commands_not_apt_lines(tmp_path):
    result = subprocess.run(
        ["/bin/sh", str(ROOT / TEST_STACK), "id", "nosuchtool:nosuch-pkg", f"{tmp_path}/libgone.so:libgone-dev"],
        capture_output=True,
        text=True,
        env={"PATH": bare_path(tmp_path, "id")},
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"error: missing: nosuchtool, {tmp_path}/libgone.so (Debian's nosuch-pkg libgone-dev); "
        "install them with this host's package manager and retry\n"
    )


def test_nothing_missing_is_silent(tmp_path):
    result = subprocess.run(
        ["/bin/sh", str(ROOT / TEST_STACK), "id", "sh:dash"],
        capture_output=True,
        text=True,
        env={"PATH": bare_path(tmp_path, "id", "sh")},
        timeout=60,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_a_python_below_the_floor_stops_the_setup_and_makes_no_venv(tmp_path):
    old_python = tmp_path / "python3.9"  # answers the floor check as Python 3.9 would
    old_python.write_text("#!/bin/sh\nexit 1\n")
    old_python.chmod(0o755)
    venv = tmp_path / "venv"
    result = subprocess.run(
        ["make", "-C", str(ROOT), "setup", f"PYTHON={old_python}", f"VENV={venv}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    floor = ".".join(map(str, interpreter.MIN_PYTHON))
    assert f"error: {old_python} is not Python {floor} or newer;" in result.stderr
    assert not venv.exists()
