"""`python -m smoke`'s command line (smoke.cli): its help, and bad input as one line and exit 2."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT
from helpers import representative

BAD_INPUT = {
    "check": (["bogus"], "invalid choice: 'bogus'"),
    "sizes": (["allreduce", "--sizes", "8:4"], "largest size is below the smallest"),
    "iters": (["--iters", "0"], "is not a whole number of 1 or more"),
    "timeout": (["--timeout", "soon"], "is not a number of seconds"),
    "dtypes": (["--dtypes", "float64"], "expected some of float32"),
    "site-facts-missing": (["--site-facts", "{missing}"], "--site-facts {missing}: No such file or directory"),
    "site-facts-form": (["--site-facts", "{config}"], "expected a JSON object with the site's name"),
    "image-facts-missing": (["--image-facts", "{missing}"], "no such file (expected the image's image.json)"),
}


# make unit: argparse's own refusal, one of the options' checks and each kind of file trouble
@pytest.mark.parametrize(
    "args, message", representative.cases(BAD_INPUT, keep=["check", "sizes", "site-facts-missing", "site-facts-form"])
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    baked = tmp_path / "config.json"
    baked.write_text(json.dumps({"sites": {"local": {}}}))
    args = [a.format(config=baked, missing=tmp_path / "nope.json") for a in args]
    message = message.format(missing=tmp_path / "nope.json")
    result = subprocess.run(
        [sys.executable, "-m", "smoke", *args, "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT / "runtime"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()


def test_the_help_opens_with_what_the_suite_does():
    result = subprocess.run(
        [sys.executable, "-m", "smoke", "--help"],
        cwd=ROOT / "runtime",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    description = result.stdout.split("\n\n")[1]
    assert description.startswith("Smoke tests for an image on a machine: all-reduce correctness"), description
