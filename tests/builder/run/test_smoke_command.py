"""`hpcml smoke TARGET` without an image run (the fake runner stands in for Apptainer and
torchrun): one rank per GPU of the site's node where this machine has GPUs, two where it has
none (issue 47: a GPU-less machine with GPU facts started eight)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from helpers.fake_runner import FakeRunner

from builder import runner
from builder.host import hostinfo, images
from builder.publish import install
from builder.recipes.tree import RecipeTree
from builder.run import smoke


def labels_of(target) -> dict:
    own = images.identity(target)
    labels = {f"org.hpc-ml-containers.{key}": value for key, value in own.items() if key != "torch"}
    labels["org.hpc-ml-containers.recipe"] = json.dumps({"torch": {"flavour": own["torch"]}})
    return {"apptainer": json.dumps({"data": {"attributes": {"labels": labels}}})}


@pytest.mark.parametrize("gpus_here, ranks", [(False, 2), (True, 8)])
def test_ranks_follow_the_gpus_this_machine_has(monkeypatch, tmp_path, gpus_here, ranks):
    tree = RecipeTree(ROOT / "recipes")
    target = tree.target("a100-cuda")
    assert target.sites[0].gpu.per_node == 8
    (tmp_path / "a100-cuda.sif").write_bytes(b"an image")
    FakeRunner(monkeypatch, answers=labels_of(target))
    monkeypatch.setattr(smoke, "ready_apptainer", lambda site: "apptainer")
    monkeypatch.setattr(hostinfo, "has_gpus", lambda: gpus_here)
    started = []
    monkeypatch.setattr(runner, "run_attached", lambda argv, **kw: started.append(argv) or 0)
    smoke.run(tree, "a100-cuda", images=tmp_path, out=None, ranks=0, timeout=60, site=None, extra=[])
    assert f"--nproc-per-node={ranks}" in started[0]


def test_gpus_are_nvidias_numbered_devices_or_amds_kfd(tmp_path):
    assert not hostinfo.has_gpus(tmp_path)
    (tmp_path / "nvidiactl").touch()  # the driver alone, no GPU
    assert not hostinfo.has_gpus(tmp_path)
    (tmp_path / "nvidia0").touch()
    assert hostinfo.has_gpus(tmp_path)
    (tmp_path / "nvidia0").unlink()
    (tmp_path / "kfd").touch()
    assert hostinfo.has_gpus(tmp_path)


def test_publish_reads_the_runtimes_word_for_not_measured():
    code = "from smoke.verdict import NOT_MEASURED; print(NOT_MEASURED)"
    word = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(ROOT, "runtime"), capture_output=True, text=True, check=True
    ).stdout.strip()
    assert install.NOT_MEASURED == word


def test_pyenv_binds_the_env_for_the_run_and_refuses_another_images(monkeypatch, tmp_path):
    """--pyenv: SING_PYENV for the wrapper, by its absolute path; an env of another target is
    refused before the suite starts (its record read with unsquashfs, as `env build` leaves it)."""
    tree = RecipeTree(ROOT / "recipes")
    (tmp_path / "cpu.sif").write_bytes(b"an image")
    envs = {}
    for target in ("cpu", "a100-cuda"):
        content = tmp_path / target
        content.mkdir()
        (content / "hpcml-pyenv.json").write_text(json.dumps({"target": target}))
        envs[target] = tmp_path / f"{target}.sqsh"
        subprocess.run(["mksquashfs", content, envs[target], "-quiet", "-no-progress"], check=True)
    monkeypatch.setattr(smoke, "ready_apptainer", lambda site: "apptainer")
    monkeypatch.setattr(smoke, "checked_labels", lambda apptainer, built: {})
    handed = []
    monkeypatch.setattr(runner, "run_attached", lambda argv, env, **kw: handed.append(env) or 0)
    options = dict(images=tmp_path, out=None, ranks=2, timeout=60, site=None, extra=[])
    smoke.run(tree, "cpu", **options, pyenv=str(envs["cpu"]))
    assert handed[0]["SING_PYENV"] == str(envs["cpu"])
    with pytest.raises(Exception, match=r"--pyenv .*a100-cuda.sqsh: an env built for image a100-cuda, not cpu"):
        smoke.run(tree, "cpu", **options, pyenv=str(envs["a100-cuda"]))
    assert len(handed) == 1
