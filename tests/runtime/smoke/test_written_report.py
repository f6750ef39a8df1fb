"""Property (issue 65): what a smoke run writes reads back. smoke.json (report.document and
report.write_json) read as publish and verify read it (json.loads, then the builder's
SmokeReport.from_json) gives every value back as it was; the verdict lines the run prints
(report.verdict_lines) keep each check on its own line, a character that would not print as
itself escaped.

Values: the checks' names, verdicts, reasons and details; the hosts, launcher, backend and
device of the session; the site's name; the smoke suite's arguments; the kernel release
(platform.release); the image's labels (/.singularity.d/labels.json); the versions of the
modules the report names (their __version__, text or not).
"""

import json
import platform
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import hpcml_facts as facts
import pytest
from conftest import ROOT
from helpers import awkward_text
from helpers.property_share import examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import report  # noqa: E402
from smoke.verdict import Verdict  # noqa: E402

text = awkward_text.text
MODULES = ("torch", "deepspeed", "numpy", "mpi4py", "matplotlib")
# a check's own fields (nets, threshold, ...): named by the check's code, never verdict or why
details = st.dictionaries(
    text.filter(lambda key: key not in ("verdict", "why")),
    st.one_of(text, st.integers(), st.lists(text, max_size=2)),
    max_size=2,
)
checks = st.dictionaries(
    text,
    st.builds(Verdict, st.sampled_from(["pass", "fail", "none", "error", "not measured"]), text, details),
    max_size=4,
)


@st.composite
def runs(draw):
    session = SimpleNamespace(
        hosts=draw(st.lists(text, min_size=1, max_size=3)),
        nodes=draw(st.integers(1, 4)),
        world=draw(st.integers(1, 16)),
        local_world=draw(st.integers(1, 8)),
        launch=draw(st.one_of(st.none(), st.builds(SimpleNamespace, source=text))),
        backend=draw(st.one_of(st.none(), text)),
        device=draw(text),
    )
    return SimpleNamespace(
        session=session,
        site=draw(st.one_of(st.none(), text)),
        argv=draw(st.lists(text, max_size=3)),
        checks=draw(checks),
        kernel=draw(text),
        labels=draw(st.dictionaries(text, text, max_size=3)),
        versions=draw(
            st.lists(st.one_of(text, st.integers(), st.tuples(st.integers(), st.integers())), min_size=5, max_size=5)
        ),
    )


def written(run, folder) -> tuple:
    """(the report as the run makes it, the path write_json wrote it to)"""
    labels = Path(folder) / "labels.json"
    labels.write_text(json.dumps({report.LABEL_PREFIX + key: val for key, val in run.labels.items()}))
    torch = SimpleNamespace(
        __version__=run.versions[0],
        version=SimpleNamespace(cuda=None),
        cuda=SimpleNamespace(is_available=lambda: False),
    )
    fakes = {
        "torch": torch,
        **{m: SimpleNamespace(__version__=v) for m, v in zip(MODULES[1:], run.versions[1:], strict=True)},
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report, "LABELS", labels)
        patch.setattr(platform, "release", lambda: run.kernel)
        for module, fake in fakes.items():
            patch.setitem(sys.modules, module, fake)
        document = report.document(run.session, run.site, run.argv, run.checks, [])
    path = Path(folder) / "smoke.json"
    report.write_json(path, document)
    return document, path


def check_report(run) -> None:
    with tempfile.TemporaryDirectory() as folder:
        document, path = written(run, folder)
        read = facts.SmokeReport.from_json(json.loads(path.read_text()), str(path))  # as publish reads it
    assert read.to_json() == document.to_json()
    assert {name: (c.verdict, c.why, c.details) for name, c in read.checks.items()} == {
        name: (c.verdict, c.why, c.details) for name, c in run.checks.items()
    }
    machine = read.machine
    assert machine.hosts == tuple(sorted(set(run.session.hosts))) and machine.kernel == run.kernel
    assert (machine.site, machine.device, machine.backend) == (run.site, run.session.device, run.session.backend)
    assert machine.launcher == (run.session.launch.source if run.session.launch else None)
    assert read.command == tuple(run.argv) and read.image == run.labels
    assert [read.versions[module] for module in MODULES] == [str(v) for v in run.versions]
    lines = report.verdict_lines(run.checks).split("\n") if run.checks else []
    assert len(lines) == len(run.checks) and all(line.isprintable() for line in lines), lines
    for line, (name, check) in zip(lines, run.checks.items(), strict=True):
        for shown in (name, check.why):
            assert not shown.isprintable() or shown in line, (shown, line)


@settings(max_examples=examples(40), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
@example(
    SimpleNamespace(
        session=SimpleNamespace(
            hosts=["n1\nn2"], nodes=1, world=1, local_world=1, launch=None, backend="gloo", device="cpu"
        ),
        site="lumi\n",
        argv=["all", "--sizes", "8:1M\r"],
        checks={"ddp\n": Verdict("error", "smoke: rank 0 failed:\n  error: \x00boom")},
        kernel="6.1\udcff",
        labels={"target": "cpu\u2028"},
        versions=["2.13.0", "0.19.8", (2, 4), 4, "x\ny"],
    )
)
def test_what_a_smoke_run_writes_reads_back(run):
    check_report(run)


def test_the_property_catches_a_writer_that_leaves_a_line_break_in_a_verdict_line(monkeypatch):
    run = SimpleNamespace(
        session=SimpleNamespace(
            hosts=["n1"], nodes=1, world=1, local_world=1, launch=None, backend="gloo", device="cpu"
        ),
        site="lumi",
        argv=[],
        checks={"ddp": Verdict("fail", "rank 1 stopped:\n  NCCL error")},
        kernel="6.1",
        labels={},
        versions=["2.13.0", "0.19.8", "2.4.6", "4.1.1", "3.10.8"],
    )
    check_report(run)  # as written: one line per check
    monkeypatch.setattr(report, "one_line", str)
    with pytest.raises(AssertionError):
        check_report(run)
