"""smoke.baseimage: how an image built on a site's own image reads that base's torch. These
are its readings of stand-in torch modules (the builder's venv has no torch); the real one
runs in the stand-in site image's build (tests/builder/layerbuild/test_site_image.py)."""

import sys
from types import SimpleNamespace

from conftest import ROOT, run_runtime_module

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import baseimage  # noqa: E402


def stand_in_torch(version="2.10.0+rocm7.0", cuda=None, hip="7.0.51831", gloo=True, nccl=True):
    """A module-like torch with only what baseimage reads (no real torch is installed here)."""
    dist = SimpleNamespace(is_available=lambda: True, is_gloo_available=lambda: gloo, is_nccl_available=lambda: nccl)
    return SimpleNamespace(
        __version__=version,
        version=SimpleNamespace(cuda=cuda, hip=hip),
        distributed=dist,
        cuda=SimpleNamespace(nccl=SimpleNamespace(version=lambda: (2, 26, 6))),
    )


def test_a_rocm_base_gives_its_versions_as_facts():
    wrong, found = baseimage.facts(stand_in_torch(), "rocm")
    assert wrong == []
    assert found["torch"] == "2.10.0+rocm7.0"
    assert (found["hip"], found["nccl"]) == ("7.0.51831", "2.26.6")


def test_a_base_whose_torch_is_not_the_targets_flavour_is_named():
    wrong, _ = baseimage.facts(stand_in_torch(version="2.10.0", hip=None, cuda="12.8"), "rocm")
    assert wrong == ["torch 2.10.0 is not a rocm build with NCCL/RCCL"]
    wrong, _ = baseimage.facts(stand_in_torch(version="2.13.0"), "cpu")
    assert wrong == ["torch 2.13.0 is a GPU build"]
    wrong, _ = baseimage.facts(stand_in_torch(hip=None, cuda=None, gloo=False), "cpu")
    assert wrong == ["torch.distributed has no gloo"]


def run(*args):
    return run_runtime_module("smoke.baseimage", *args, timeout=60)


def test_a_python_without_torch_fails_in_one_marked_line():
    result = run("rocm", "org.example", "hpcml-error: ")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"hpcml-error: the image's python {sys.executable} has no working torch (")
    assert result.stderr.rstrip().endswith("expected a rocm torch")


def test_wrong_arguments_are_a_usage_error():
    for args in ((), ("tpu", "org.example"), ("cpu",)):
        result = run(*args)
        assert result.returncode == 2, args
        assert result.stderr.startswith("baseimage: error: expected FLAVOUR (cpu, cuda or rocm)")
