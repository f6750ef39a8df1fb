"""amd_driver: the node's amdgpu release, read from the module's version in each form it
takes, judged against the image's copy of AMD's matrix."""

import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from hpcml_facts import GpuPromise  # noqa: E402
from smoke import amd_driver  # noqa: E402

ROCM_IMAGE = GpuPromise(
    ("gfx90a",),
    amdgpu_runs={"6.3": ("6.1", "6.2", "6.3", "6.4", "7.0"), "30.10": ("6.2", "6.3", "6.4", "7.0", "7.1", "7.2")},
    amdgpu_modules={"6.10.5": "6.3"},
)


@pytest.mark.parametrize(
    "version, release",
    [
        ("6.10.5", "6.3"),  # the module names the kernel it was ported from: the table says
        ("6.3.60300", "6.3"),  # LUMI's package form
        ("6.10.5.60300", "6.3"),  # AMD's amdgpu-dkms form
        ("6.12.12.60400", "6.4"),
        ("30.10.1", "30.10"),  # 30.10 and later name themselves
        ("6.8.0", ""),  # an upstream kernel's own amdgpu: no ROCm release
        ("garbage", ""),
    ],
)
def test_the_release_is_read_from_each_form_of_the_version(version, release):
    assert amd_driver.release(version, {"6.10.5": "6.3"}) == release


def test_lumis_driver_runs_rocm_7_0_and_not_7_2():
    assert amd_driver.verdict("6.3.60300", "7.0.51831", ROCM_IMAGE).verdict == "pass"
    refused = amd_driver.verdict("6.3.60300", "7.2.26015", ROCM_IMAGE)
    assert refused.verdict == "fail"
    assert refused.why == (
        "amdgpu 6.3.60300 (release 6.3) runs ROCm 6.1 to 7.0, not this image's ROCm 7.2 (AMD's support "
        "matrix): use an image of ROCm 7.0 or older, or ask the admins for a driver that runs 7.2"
    )
    assert amd_driver.verdict("30.10.1", "7.2.26015", ROCM_IMAGE).verdict == "pass"


def test_a_driver_it_cannot_place_is_not_judged_either_way():
    for version, hip in ((None, "7.0.1"), ("6.8.0", "7.0.1"), ("31.50.0", "7.0.1"), ("6.3.60300", None)):
        assert amd_driver.verdict(version, hip, ROCM_IMAGE).verdict == "none", version


def test_the_matrix_travels_in_image_json():
    data = ROCM_IMAGE.to_json()
    assert data["amdgpu_runs"]["6.3"][-1] == "7.0" and data["amdgpu_modules"] == {"6.10.5": "6.3"}
    assert GpuPromise.from_json(data, "image.json") == ROCM_IMAGE
    assert "amdgpu_runs" not in GpuPromise(("sm_80",)).to_json()
