"""A project env rebuilt from a source bundle with no network gives the online build's bytes:
`hpcml bundle cpu --pyenv LOCK` takes the env's files (real PyPI packages, an sdist among
them) beside the image's, then `hpcml env build --bundle` runs in a network namespace with
loopback alone, with an empty pip cache. Marker full: the bundle is the CPU image's too (about 750 MB,
two minutes)."""

import hashlib
import shlex
import subprocess
import sys

import pytest
from conftest import ROOT, run_builder

from builder.bundle import manifest

pytestmark = pytest.mark.full
REQUIREMENTS = "hydra-core==1.3.2\ntabulate==0.10.0\n"  # hydra's antlr4 runtime is an sdist


def test_an_env_built_from_a_bundle_offline_is_the_online_build_byte_for_byte(cpu_image, apptainer, tmp_path):
    online, offline = tmp_path / "online", tmp_path / "offline"
    for folder in (online, offline):
        folder.mkdir()
    (online / "requirements.txt").write_text(REQUIREMENTS)
    assert run_builder("env", "lock", "cpu", online / "requirements.txt", timeout=600).returncode == 0
    lock = online / "requirements.cpu.lock"
    images = ["--images", str(cpu_image.parent)]
    built = run_builder("env", "build", "cpu", lock, *images, env={"HPCML_APPTAINER": apptainer}, timeout=900)
    assert built.returncode == 0, built.stderr
    bundle = tmp_path / "bundle"
    made = run_builder("bundle", "cpu", "--pyenv", lock, "--out", bundle, timeout=1800)
    assert made.returncode == 0, made.stderr[-3000:]
    listed = manifest.read(bundle)
    assert "pyenv/locks/requirements.cpu.lock" in listed
    assert "pyenv/antlr4-python3-runtime-4.9.3.tar.gz" in listed
    (offline / "requirements.cpu.lock").write_bytes(lock.read_bytes())
    command = [sys.executable, "-m", "builder", "env", "build", "cpu", str(offline / "requirements.cpu.lock")]
    command += [*images, "--bundle", str(bundle)]
    inner = f"ip link set lo up && exec {shlex.join(command)}"
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp_path)}
    env["HPCML_APPTAINER"] = apptainer
    env["XDG_CACHE_HOME"] = str(tmp_path / "empty-cache")  # no pip cache: every file from the bundle
    env["HPCML_TOOLBOX_BINDS"] = str(bundle)
    ran = subprocess.run(
        ["unshare", "--net", "sh", "-c", inner], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    log = (offline / "requirements.cpu.build.log").read_text()
    assert "Processing /mnt/bundle-python/antlr4-python3-runtime-4.9.3.tar.gz" in log
    sha = [hashlib.sha256((folder / "requirements.cpu.sqsh").read_bytes()).hexdigest() for folder in (online, offline)]
    assert sha[0] == sha[1]
