"""The Apptainer toolbox: provisioned for real into a private cache, repaired when broken,
removed with one command; a clear message where it cannot be made."""

import os

import pytest
from conftest import run_builder

from builder.errors import ToolError
from builder.host import toolbox
from builder.host.progress import Progress


def test_without_root_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ToolError) as error:
        toolbox.ensure(Progress(), tmp_path)
    message = str(error.value)
    assert "no apptainer or singularity on PATH" in message and "needs root" in message
    assert "install Apptainer" in message and "\n" not in message
    assert not (tmp_path / "hpc-ml-containers" / "toolbox").exists()


# Provisions Apptainer itself, twice (debootstrap and unpacking: 7 min on 2 cores); on a fresh
# machine make test's first image test provisions the user's toolbox the same way.
@pytest.mark.image
@pytest.mark.full
def test_provision_repair_and_remove(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    status = run_builder("toolbox", "status").stdout.splitlines()
    assert status[0].endswith("not provisioned")
    # issue 34: the emulator for the other architecture is the host kernel's, shown beside it
    assert status[1].startswith("emulation aarch64: ") and len(status) == 2
    command = toolbox.ensure(Progress(), tmp_path)
    assert "apptainer version" in toolbox.version()
    assert command == tmp_path / "hpc-ml-containers" / "toolbox" / "bin" / "apptainer"
    assert not list((tmp_path / "hpc-ml-containers").glob("toolbox.tmp-*"))
    status = run_builder("toolbox", "status", env={"XDG_CACHE_HOME": str(tmp_path)})
    assert "apptainer version" in status.stdout

    # broken: the binary is gone; the next use provisions it again
    (tmp_path / "hpc-ml-containers" / "toolbox" / "root" / "usr" / "bin" / "apptainer").unlink()
    assert not toolbox.is_ready()
    toolbox.ensure(Progress(), tmp_path)
    assert "apptainer version" in toolbox.version()

    removed = run_builder("toolbox", "remove", env={"XDG_CACHE_HOME": str(tmp_path)})
    assert removed.returncode == 0
    assert not (tmp_path / "hpc-ml-containers" / "toolbox").exists()


def test_the_shim_runs_in_the_callers_directory_with_its_files(tmp_path):
    # uses the user's toolbox (provisioned by the build tests or now)
    command = toolbox.ensure(Progress(), tmp_path)
    (tmp_path / "marker.txt").write_text("seen\n")
    from builder import runner

    result = runner.run([str(command), "--version"], cwd=tmp_path)
    assert result.stdout.startswith("apptainer version")
    enter = command.parent / "enter"
    seen = runner.run([str(enter), "/bin/sh", "-c", "pwd; cat marker.txt; test -x /usr/bin/apptainer"], cwd=tmp_path)
    assert seen.stdout.split() == [str(tmp_path), "seen"]


def test_the_downloaded_apptainer_must_be_the_pinned_one(tmp_path):
    deb = tmp_path / f"apptainer_{toolbox.APPTAINER_VERSION}_amd64.deb"
    deb.write_bytes(b"not the pinned .deb")
    with pytest.raises(ToolError) as caught:
        toolbox.check_apptainer_deb(tmp_path, "x86_64")
    message = str(caught.value)
    assert message.startswith(f"{deb}: sha256 ") and toolbox.APPTAINER_SHA256["x86_64"] in message
    assert "\n" not in message
    deb.unlink()
    with pytest.raises(ToolError, match="expected one apptainer .deb, found 0"):
        toolbox.check_apptainer_deb(tmp_path, "x86_64")


def test_each_host_architecture_has_a_pinned_sha256():
    assert set(toolbox.APPTAINER_SHA256) == {"x86_64", "aarch64"}
    assert all(len(sha) == 64 and int(sha, 16) >= 0 for sha in toolbox.APPTAINER_SHA256.values())
