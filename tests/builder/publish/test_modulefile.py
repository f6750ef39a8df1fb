"""The module's help line about the smoke tests, from the report as publish reads it (a
SmokeReport): what a publish with a report writes, without an image."""

from hpcml_facts import SmokeReport

from builder.publish import modulefile

REPORT = {
    "created": "2026-11-27T22:00:00+0000",
    "machine": {"hosts": ["n1", "n2"], "nodes": 2, "ranks": 4, "device": "cpu"},
    "versions": {"torch": "2.13.0+cpu"},
    "checks": {"ddp": {"verdict": "pass", "why": "loss fell"}},
    "verdict": "pass",
}


def test_the_help_says_when_and_where_the_smoke_tests_passed():
    report = SmokeReport.from_json(REPORT, "smoke.json")
    assert modulefile._smoke_line(report, "/appl/ml/pytorch/2.13") == (
        "passed 2026-11-27T22:00:00+0000 on 2 node(s), 4 ranks (cpu); report: /appl/ml/pytorch/2.13/smoke.json"
    )


def test_a_report_that_leaves_out_the_machine_says_question_marks():
    report = SmokeReport.from_json({"verdict": "pass"}, "smoke.json")
    assert modulefile._smoke_line(report, "/p").startswith("passed ? on ? node(s), ? ranks (?)")
    assert modulefile._smoke_line(None, "/p").startswith("NOT RUN: published with --skip-smoke")
