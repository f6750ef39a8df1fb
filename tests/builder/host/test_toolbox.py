"""The Apptainer toolbox: provisioned for real into a private cache, repaired when broken,
removed with one command; a clear message where it cannot be made."""

import hashlib
import os
import platform
from pathlib import Path

import pytest
from conftest import run_builder

from builder import runner
from builder.errors import ToolError
from builder.host import debootstrap_kit, toolbox
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


def test_provisioning_takes_the_root_and_the_pinned_apptainer_from_the_given_mirror(tmp_path, monkeypatch):
    """What a build from a bundle gives: its loopback mirror, for debootstrap and the .deb alike."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    deb, runs, fetched = b"an apptainer .deb", [], []
    monkeypatch.setitem(toolbox.APPTAINER_SHA256, "x86_64", hashlib.sha256(deb).hexdigest())
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(debootstrap_kit, "host_debootstrap", lambda: "/usr/sbin/debootstrap")
    monkeypatch.setattr(
        debootstrap_kit, "fetch_pinned", lambda url, sha256, name, pinned_in: fetched.append(url) or deb
    )

    def run_logged(argv, log, what):
        runs.append(argv)
        if what == "debootstrap":  # the root debootstrap makes, as far as the steps after it look
            root = Path(argv[-2])
            (root / "var/cache/apt/archives").mkdir(parents=True)
            (root / "etc/apptainer").mkdir(parents=True)
            (root / "etc/apptainer/apptainer.conf").write_text("root default capabilities = full\n")

    monkeypatch.setattr(runner, "run_logged", run_logged)
    monkeypatch.setattr(toolbox, "version", lambda: "apptainer version 1.4.5-2")
    toolbox.provision(Progress(), tmp_path, "http://127.0.0.1:40001/debian/")
    assert runs[0][-3] == "trixie" and runs[0][-1] == "http://127.0.0.1:40001/debian"
    assert runs[0][:3] == ["/usr/sbin/debootstrap", "--variant=minbase", "--include=ca-certificates"]
    pool = f"pool/main/a/apptainer/apptainer_{toolbox.APPTAINER_VERSION}_amd64.deb"
    assert fetched == [f"http://127.0.0.1:40001/debian/{pool}"]
    installed = runs[-1][-1]
    assert "apptainer_*.deb debootstrap squashfs-tools" in installed and "--no-install-recommends" in installed
    assert (toolbox.home() / "root/var/cache/apt/archives" / Path(pool).name).read_bytes() == deb
    assert toolbox.home().joinpath(toolbox.STAMP).is_file()


def test_debootstrap_is_given_a_path_without_spaces(tmp_path):
    """debootstrap's scripts split its target at spaces (seen: chroot "/tmp/empty cache/..."
    /bin/true failed), so a cache under a folder with a space is reached through a link."""
    root = tmp_path / "my cache" / "toolbox.tmp-1" / "root"
    with toolbox._without_spaces(root) as target:
        assert " " not in str(target) and target.resolve() == root.resolve() and root.is_dir()
        link = target
    assert not link.exists() and not link.parent.exists()
    with toolbox._without_spaces(tmp_path / "plain") as target:
        assert target == tmp_path / "plain"
