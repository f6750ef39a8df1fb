"""smoke.commands: every program the suite runs, run with one timeout rule."""

import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import commands  # noqa: E402


def test_a_program_is_run_with_one_timeout_rule(tmp_path):
    done = commands.run(["sh", "-c", "cat; echo out; echo err >&2; exit 3"], 10)
    assert (done.returncode, done.stdout, done.stderr, done.timed_out) == (3, "out\n", "err\n", False)
    late = commands.run(["sleep", "5"], 0.2)
    assert late.timed_out and late.late == "did not finish in 0.2 s"
    with pytest.raises(FileNotFoundError):
        commands.run([str(tmp_path / "no-such-program")], 10)
