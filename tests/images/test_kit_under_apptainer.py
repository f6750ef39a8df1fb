"""The builder's own debootstrap (host.debootstrap_kit) under a real Apptainer: a Debian root
made by Apptainer's debootstrap agent with the kit first on PATH, as a host without
debootstrap builds one (issue 51). About a minute: one bookworm minbase."""

import os
import subprocess

from builder.host import build_route, debootstrap_kit, hostinfo
from builder.host.progress import Progress

DEFINITION = """Bootstrap: debootstrap
OSVersion: bookworm
MirrorURL: {{ MIRROR }}

%post
echo built-by-the-kit > /etc/hpcml-kit
"""


def test_apptainers_debootstrap_agent_runs_the_kit_when_it_is_first_on_path(apptainer, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    mirror = hostinfo.debian_mirror()
    path = debootstrap_kit.search_path(DEFINITION, Progress(), os.environ["PATH"])
    if path is None:  # this host has a debootstrap of its own: put the kit first all the same
        path = f"{debootstrap_kit.kit_bin(Progress(), mirror)}{os.pathsep}{os.environ['PATH']}"
    (tmp_path / "kit.def").write_text(DEFINITION)
    argv = [apptainer, "build", *(["--fakeroot"] if build_route.check().fakeroot else [])]
    argv += ["--build-arg", f"MIRROR={mirror}", str(tmp_path / "kit.sif"), str(tmp_path / "kit.def")]
    env = dict(os.environ, PATH=path, APPTAINER_TMPDIR=str(tmp_path), APPTAINER_CACHEDIR=str(tmp_path / "ac"))
    built = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    log = built.stdout + built.stderr
    assert built.returncode == 0, log[-3000:]
    assert f"{debootstrap_kit.MARKER} {debootstrap_kit.VERSION} from the builder's cache" in log
    assert "Valid Release signature" in log  # the kit's keyring checked the archive
    shown = subprocess.run(
        [apptainer, "exec", str(tmp_path / "kit.sif"), "cat", "/etc/debian_version", "/etc/hpcml-kit"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.stdout.startswith("12.") and shown.stdout.endswith("built-by-the-kit\n"), shown
