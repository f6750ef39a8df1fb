"""smoke.report: the checks' verdicts as smoke.json records them, their lines, and the overall verdict."""

import json
import sys
from types import SimpleNamespace

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from hpcml_facts import FactsError, SmokeReport  # noqa: E402
from smoke import report  # noqa: E402
from smoke.verdict import Verdict  # noqa: E402

SESSION = SimpleNamespace(
    hosts=["n2", "n1", "n1"], nodes=2, world=4, local_world=2, launch=SimpleNamespace(source="slurm"),
    backend="gloo", device="cpu",
)  # fmt: skip


def test_a_verdict_is_recorded_in_smoke_json_as_before(tmp_path):
    """smoke.json's checks stay {"verdict", "why", and what the check measured}, and the
    report reads back as the record it was written from."""
    checks = {
        "transport": Verdict.failed("ranks used socket", nets=["socket"]),
        "mpi4py": Verdict.none("launched by torchrun, not by MPI or srun"),
        "allreduce sum": Verdict.judged(True, "exact at all 4 sizes"),
    }
    path = tmp_path / "smoke.json"
    written = report.document(SESSION, "lumi", ["all", "--sizes", "8:1M"], checks, [])
    report.write_json(path, written)
    data = json.loads(path.read_text())
    assert data["checks"] == {
        "transport": {"verdict": "fail", "why": "ranks used socket", "nets": ["socket"]},
        "mpi4py": {"verdict": "none", "why": "launched by torchrun, not by MPI or srun"},
        "allreduce sum": {"verdict": "pass", "why": "exact at all 4 sizes"},
    }
    assert data["verdict"] == "fail" and data["machine"]["hosts"] == ["n1", "n2"]
    assert data["machine"]["site"] == "lumi" and data["command"] == ["all", "--sizes", "8:1M"]
    assert SmokeReport.from_json(data, "smoke.json") == written
    assert written.named("fail") == {"transport": "ranks used socket"}


def test_a_report_of_the_wrong_shape_is_one_line_naming_the_key():
    with pytest.raises(FactsError, match=r"^smoke\.json: checks: ddp: verdict: expected str, not 3$"):
        SmokeReport.from_json({"verdict": "pass", "checks": {"ddp": {"verdict": 3}}}, "smoke.json")
    with pytest.raises(FactsError, match=r"^smoke\.json: verdict: missing$"):
        SmokeReport.from_json({"checks": {}}, "smoke.json")


def test_the_verdict_lines_and_the_overall_verdict():
    checks = {"mpi4py": Verdict.none("launched by torchrun, not by MPI or srun")}
    assert report.verdict_lines(checks) == ("mpi4py  NONE         launched by torchrun, not by MPI or srun")
    assert report.overall({"a": Verdict.passed("x"), "b": Verdict.none("y")}) == "pass"
    assert report.overall({"a": Verdict("error", "stopped")}) == "fail"
