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
