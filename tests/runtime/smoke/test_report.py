"""smoke.report: the checks' verdicts as smoke.json records them, their lines, and the overall verdict."""

import json
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import report  # noqa: E402
from smoke.verdict import Verdict  # noqa: E402


def test_a_verdict_is_recorded_in_smoke_json_as_before(tmp_path):
    """smoke.json's checks stay {"verdict", "why", and what the check measured}."""
    checks = {
        "transport": Verdict.failed("ranks used socket", nets=["socket"]),
        "mpi4py": Verdict.none("launched by torchrun, not by MPI or srun"),
        "allreduce sum": Verdict.judged(True, "exact at all 4 sizes"),
    }
    path = tmp_path / "smoke.json"
    report.write_json(
        path, {"checks": {name: check.to_json() for name, check in checks.items()}, "verdict": report.overall(checks)}
    )
    assert json.loads(path.read_text()) == {
        "checks": {
            "transport": {"verdict": "fail", "why": "ranks used socket", "nets": ["socket"]},
            "mpi4py": {"verdict": "none", "why": "launched by torchrun, not by MPI or srun"},
            "allreduce sum": {"verdict": "pass", "why": "exact at all 4 sizes"},
        },
        "verdict": "fail",
    }
    assert report.verdict_lines({"mpi4py": checks["mpi4py"]}) == (
        "mpi4py  NONE         launched by torchrun, not by MPI or srun"
    )
    assert report.overall({"a": Verdict.passed("x"), "b": Verdict.none("y")}) == "pass"
    assert report.overall({"a": Verdict("error", "stopped")}) == "fail"
