"""smoke.bandwidth: bus bandwidth from algorithm bandwidth, the site's reference that fits the
run's shape, and the verdict within its tolerance."""

import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from hpcml_facts import Reference  # noqa: E402
from smoke import bandwidth  # noqa: E402

LUMI_REFS = [
    Reference(nodes=1, bytes=134217728, dtype="float16", busbw_gbs=125, tolerance=0.05, source="x"),
    Reference(nodes=2, bytes=134217728, dtype="float16", busbw_gbs=85, tolerance=0.05, source="y"),
]


def test_busbw_is_algbw_times_2_n_minus_1_over_n():
    algbw = bandwidth.algbw_gbs(134217728, 0.001)  # 128 MiB in 1 ms
    assert algbw == pytest.approx(134.217728)
    assert bandwidth.allreduce_busbw_gbs(algbw, 8) == pytest.approx(algbw * 14 / 8)
    assert bandwidth.allreduce_busbw_gbs(algbw, 2) == pytest.approx(algbw)
    assert bandwidth.allreduce_busbw_gbs(algbw, 1) == 0


def test_the_threshold_follows_the_runs_shape():
    assert bandwidth.pick_threshold(LUMI_REFS, 1, ["float16"])["busbw_gbs"] == 125
    assert bandwidth.pick_threshold(LUMI_REFS, 2, ["float32", "float16"])["busbw_gbs"] == 85
    assert bandwidth.pick_threshold(LUMI_REFS, 16, ["float16"])["nodes"] == 2  # most nodes below
    assert bandwidth.pick_threshold(LUMI_REFS, 2, ["float32"]) is None  # dtype not measured
    assert bandwidth.pick_threshold([], 1, ["float32"]) is None


def _row(busbw, nbytes=134217728, dtype="float16"):
    return {"dtype": dtype, "bytes": nbytes, "busbw_gbs": busbw}


def test_verdicts_apply_the_tolerance_and_give_the_margin():
    reference = LUMI_REFS[1].to_json()  # 85 GB/s, -5 % -> floor 80.75; as pick_threshold gives it
    passed = bandwidth.judge([_row(81.0)], reference)
    assert passed.verdict == "pass" and passed.details["margin"] == pytest.approx(81 / 80.75 - 1)
    failed = bandwidth.judge([_row(80.5)], reference)
    assert failed.verdict == "fail" and "80.50 GB/s < 80.75 GB/s" in failed.why
    assert bandwidth.judge([_row(200, nbytes=1 << 20)], reference).verdict == "not measured"
    assert bandwidth.judge([_row(1)], None).verdict == "none"
