"""The torch block's check, run where torch is installed and in %test, against stand-in torch
packages (no real torch here): a wrong build fails with one marked line the builder reports."""

import subprocess
import sys

import pytest

from builder import contract
from builder.layerbuild.build_log import failure_line
from builder.render.blocks import torch as torch_block

# A stand-in torch: its version and which GPU toolkit it was "built with".
FAKE_TORCH = """
__version__ = {version!r}
class version:
    cuda = {cuda!r}
    hip = {hip!r}
"""
FAKE_DISTRIBUTED = """
def is_available(): return True
def is_gloo_available(): return True
def is_nccl_available(): return {nccl!r}
"""


def run_check(tmp_path, *, installed, cuda=None, hip=None, wanted, flavour):
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(FAKE_TORCH.format(version=installed, cuda=cuda, hip=hip))
    (package / "distributed.py").write_text(FAKE_DISTRIBUTED.format(nccl=bool(cuda or hip)))
    return subprocess.run(
        [sys.executable, "-c", torch_block._TORCH_CHECK, wanted, flavour],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "installed, cuda, hip, wanted, flavour, reason",
    [
        # the CPU index left out: PyPI's CUDA build came in
        ("2.13.0", "13.0", None, "2.13.0", "cpu", "torch 2.13.0 is a GPU build"),
        # the ROCm index left out: the same
        ("2.10.0", "12.8", None, "2.10.0", "rocm", "torch 2.10.0 was not built with ROCm and RCCL"),
        ("2.9.1+rocm6.4", None, "6.4", "2.10.0", "rocm", "torch 2.9.1+rocm6.4 is installed"),
        # a CUDA build of another release: both said
        ("2.11.0", "13.0", None, "2.13.0", "cpu", "torch 2.11.0 is installed; torch 2.11.0 is a GPU build"),
        ("2.13.0+cpu", None, None, "2.13.0", "cuda", "torch 2.13.0+cpu was not built with CUDA and NCCL"),
    ],
)
def test_a_wrong_torch_fails_in_one_marked_line(tmp_path, installed, cuda, hip, wanted, flavour, reason):
    result = run_check(tmp_path, installed=installed, cuda=cuda, hip=hip, wanted=wanted, flavour=flavour)
    assert result.returncode == 1
    assert result.stderr.startswith(contract.FAILURE_MARKER)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert failure_line(result.stderr) == f"{reason}; expected torch {wanted} built for {flavour}"


@pytest.mark.parametrize(
    "installed, cuda, hip, flavour",
    [("2.13.0+cpu", None, None, "cpu"), ("2.10.0+rocm7.0", None, "7.0", "rocm"), ("2.13.0", "13.0", None, "cuda")],
)
def test_the_right_torch_passes(tmp_path, installed, cuda, hip, flavour):
    result = run_check(
        tmp_path, installed=installed, cuda=cuda, hip=hip, wanted=installed.split("+")[0], flavour=flavour
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"torch {installed} gloo: yes")


def test_the_layer_that_installs_torch_runs_the_check(tree):
    """The devel layer checks torch right after pip installs it, before DeepSpeed builds on it."""
    for name in ("cpu", "lumi-rocm", "lumi-rocm64", "h100-cuda"):
        target = tree.target(name)
        build = next(p for p in torch_block.parts(target) if p.stage == "build")
        pip_at = next(i for i, line in enumerate(build.post) if line.startswith("pip install"))
        # a locked install removes its lock file right after pip, then checks
        check_at = pip_at + 2 if build.post[pip_at + 1] == 'rm -f "$lock"' else pip_at + 1
        assert torch_block._TORCH_CHECK.strip() in build.post[check_at], name
        assert build.post[check_at].endswith(f" {target.torch.version} {target.torch.flavour}"), name
