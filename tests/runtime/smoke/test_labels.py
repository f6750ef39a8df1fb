"""smoke.labels: what only the built image knows (its NCCL or RCCL, CUDA or HIP, and the oldest
driver), read from torch's version attributes."""

import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from hpcml_facts import GpuPromise, ImageFacts  # noqa: E402


def fake_torch(cuda=None, hip=None, nccl=(2, 29, 7)):
    """torch's version attributes as a GPU build reports them (no GPU needed to read them)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        version=SimpleNamespace(cuda=cuda, hip=hip), cuda=SimpleNamespace(nccl=SimpleNamespace(version=lambda: nccl))
    )


def test_a_cuda_images_labels_name_nccl_cuda_and_the_oldest_driver():
    from smoke import labels

    image = ImageFacts("a100-cuda", GpuPromise(("sm_80",), {"12": "525.60.13", "13": "580.65.06"}))
    assert labels.measured(fake_torch(cuda="13.0"), image) == {
        "nccl.version": "2.29.7",
        "cuda.runtime": "13.0",
        "cuda.min_driver": "580.65.06",
    }
    rocm = ImageFacts("lumi-rocm", GpuPromise(("gfx90a",)))
    assert labels.measured(fake_torch(hip="6.4.43484", nccl=2.22), rocm) == {
        "rccl.version": "2.22",
        "rocm.hip": "6.4.43484",
    }


def test_a_cuda_release_without_a_known_driver_stops_the_build():
    from smoke import labels

    with pytest.raises(SystemExit, match="no oldest driver known for CUDA 14: add it to cuda_min_driver"):
        labels.measured(fake_torch(cuda="14.1"), ImageFacts("h100-cuda", GpuPromise(("sm_90",), {"13": "580.65.06"})))
