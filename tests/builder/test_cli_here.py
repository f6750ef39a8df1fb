"""helpers.cli_here runs the command line in the test's interpreter; these check it gives
what a fresh `python -m builder` gives, which the unit tests that use it rely on."""

import os

import pytest
from conftest import run_builder
from helpers import representative
from helpers.cli_here import run_here

# make unit: a note on stderr with output, a refusal, help and a usage error (argparse's exit)
SAME = {
    "list": (["list", "--images", "no-such-folder"],),
    "alias-note": (["show", "puhti-cuda"],),
    "jobscript-note": (["jobscript", "lumi-rocm", "--nodes", "2", "--", "python", "train.py"],),
    "bad-qos": (["jobscript", "cpu", "--qos", "nosuchqos", "--", "train.py"],),
    "help": (["render", "--help"],),
    "usage": (["nosuchcommand"],),
}


@pytest.mark.parametrize("args", representative.cases(SAME, keep=["jobscript-note", "bad-qos", "help", "usage"]))
def test_here_and_fresh_give_the_same_status_and_output(args):
    here, fresh = run_here(*args), run_builder(*args)
    assert (here.returncode, here.stdout, here.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_what_child_processes_print_is_caught_and_the_call_leaves_no_trace(tmp_path, monkeypatch, capfd):
    """doctor runs other programs through the runner; the result holds what it printed, the
    environment and working folder come back as they were, and nothing reaches the terminal."""
    monkeypatch.setenv("KEEP_ME", "1")
    before = os.getcwd()
    result = run_here("doctor", cwd=tmp_path, env={"HPCML_APPTAINER": str(tmp_path / "no-apptainer")})
    assert "apptainer" in result.stdout + result.stderr and "Traceback" not in result.stderr
    assert "HPCML_APPTAINER" not in os.environ and os.environ["KEEP_ME"] == "1"
    assert os.getcwd() == before
    assert capfd.readouterr() == ("", "")
