"""tests/helpers/child_signals.py: a child that a test stops with SIGINT stops, even when the
test run itself was started with SIGINT ignored, as `bash -c 'make test & wait $!'` starts it
(issue #65). Without the helper the same child ignores the signal: the case the helper fixes."""

import signal
import subprocess
import sys

import pytest
from conftest import ROOT

# A test process that starts a child, sends it SIGINT and says how the child ended.
PARENT = """
import signal, subprocess, sys
from helpers.child_signals import default_signals
assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # as a shell's `&` job has it
helped = sys.argv[1] == "helper"
child = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=default_signals if helped else None)
assert child.stdout.readline() == "ready\\n"
child.send_signal(signal.SIGINT)
try:
    _, err = child.communicate(timeout=30 if helped else 2)
    print(child.returncode, "KeyboardInterrupt" in err)
except subprocess.TimeoutExpired:
    child.kill()
    child.wait()
    print("still running")
"""

CHILDREN = {
    # Python installs its KeyboardInterrupt handler only where SIGINT is not ignored at start
    "python": ([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"], "-2 True"),
    # a shell cannot trap a signal that was ignored when it started
    "sh": (["sh", "-c", 'trap "exit 42" INT; echo ready; while :; do sleep 0.1; done'], "42 False"),
}


def ignoring_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("way", ["helper", "without"])
@pytest.mark.parametrize("child, stopped", CHILDREN.values(), ids=CHILDREN.keys())
def test_a_child_started_with_default_signals_stops_at_sigint_under_a_parent_that_ignores_it(way, child, stopped):
    result = subprocess.run(
        [sys.executable, "-c", PARENT, way, *child],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "tests")},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=ignoring_sigint,  # the test run's state under `make test &`, whatever this one's is
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (stopped if way == "helper" else "still running")
