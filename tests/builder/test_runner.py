"""builder/runner.py and build-guard.sh stop what they started, for real: a command that
ignores SIGTERM, and one whose child does too, end within the grace period plus a small margin
whether the guard is told to stop, the builder is interrupted, times out or is SIGKILLed;
nothing is left running and the temporary paths are gone."""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from conftest import ROOT, wait_until
from helpers.child_signals import default_signals

from builder import runner
from builder.errors import RecipeError, ToolError

GRACE = 1  # HPCML_STOP_GRACE for these tests: short, the tests wait it out
BOUND = GRACE + 10  # everything must be gone this long after the stop began
GUARD = ROOT / "builder" / "build-guard.sh"

# Each process renames itself (exec -a) after the marker ($0), so /proc/*/cmdline finds it.
IGNORES = 'trap "" TERM; exec -a "$0-child" sleep 300'
SPAWNS = 'trap "" TERM; (exec -a "$0-grandchild" sleep 301) & exec -a "$0-child" sleep 300'
COMMANDS = {"ignores-TERM": (IGNORES, ["child"]), "grandchild-ignores-TERM": (SPAWNS, ["child", "grandchild"])}


def marked(marker):
    """Pids of the live processes whose command line holds ``marker`` (zombies have none)."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def started(marker, names):
    return lambda: all(marked(f"{marker}-{name}\0") for name in names)


@pytest.fixture
def marker():
    """A unique marker; whatever still carries it after the test is KILLed (and reported)."""
    mark = f"hpcml-stop-test-{uuid.uuid4().hex[:12]}"
    yield mark
    for pid in marked(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def temps(tmp_path):
    """A half-written image and a work folder, as a build leaves them."""
    sif, work = tmp_path / ".x.sif.tmp-1", tmp_path / "work"
    sif.write_text("half an image")
    (work / "deep").mkdir(parents=True)
    (work / "deep" / "file").write_text("work")
    return [sif, work]


def grace_env(**more):
    return dict(os.environ, HPCML_STOP_GRACE=str(GRACE), PYTHONPATH=str(ROOT), **more)


def assert_all_stopped(marker, temps, began):
    """Nothing carrying ``marker`` runs, within BOUND seconds of ``began``; temps are gone."""
    assert wait_until(lambda: not marked(marker), BOUND - (time.monotonic() - began)), (
        f"still running: {marked(marker)}"
    )
    took = time.monotonic() - began
    print(f"stopped in {took:.1f} s")
    assert took < BOUND
    assert [path for path in temps if path.exists()] == []
    return took


# --- the guard alone -----------------------------------------------------------------------


@pytest.mark.parametrize("command, names", COMMANDS.values(), ids=COMMANDS.keys())
def test_the_guard_kills_a_group_that_ignores_term_after_the_grace(tmp_path, marker, temps, command, names):
    log = tmp_path / "log"
    with open(log, "w") as out:
        guard = subprocess.Popen(
            ["bash", GUARD, *temps, "--", "bash", "-c", command, marker],
            env=grace_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=default_signals,  # bash traps no signal that was ignored when it started
        )
    assert wait_until(started(marker, names), 30), log.read_text()
    began = time.monotonic()
    guard.send_signal(signal.SIGTERM)
    assert guard.wait(timeout=BOUND) == 143
    took = assert_all_stopped(marker, temps, began)
    assert took >= GRACE  # TERM first: the KILL came only after the grace
    assert "build-guard: stopping the command" in log.read_text()


def test_the_guard_sends_term_to_every_process_of_the_command_first(tmp_path, marker, temps):
    # as apptainer and its children must: each one handles TERM (cleans up) and ends at once
    seen = tmp_path / "seen"
    seen.mkdir()
    command = (
        '(trap "touch $1/grandchild; exit 0" TERM; exec -a "$0-grandchild" sleep 300 & wait) & '
        'trap "touch $1/child; exit 0" TERM; exec -a "$0-child" sleep 300 & wait'
    )
    guard = subprocess.Popen(
        ["bash", GUARD, *temps, "--", "bash", "-c", command, marker, seen],
        env=grace_env(),
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=default_signals,
    )
    assert wait_until(started(marker, ["child", "grandchild"]), 30)  # each set its trap before
    began = time.monotonic()
    guard.send_signal(signal.SIGTERM)
    assert guard.wait(timeout=BOUND) == 143
    assert time.monotonic() - began < GRACE  # no KILL needed
    assert sorted(path.name for path in seen.iterdir()) == ["child", "grandchild"]
    assert_all_stopped(marker, temps, began)


def test_the_guard_passes_on_the_commands_exit_status(tmp_path, temps):
    result = subprocess.run(
        ["bash", GUARD, *temps, "--", "sh", "-c", "exit 7"], env=grace_env(), stdin=subprocess.DEVNULL, timeout=30
    )
    assert result.returncode == 7
    assert all(path.exists() for path in temps)  # the caller keeps or removes them


@pytest.mark.parametrize("grace", ["x", "-1", "1.5", "", "123456"])
def test_a_bad_grace_is_refused_before_anything_runs(tmp_path, grace):
    ran = tmp_path / "ran"
    env = dict(os.environ, HPCML_STOP_GRACE=grace)
    result = subprocess.run(["bash", GUARD, "--", "touch", ran], env=env, capture_output=True, text=True, timeout=30)
    if grace == "":  # unset or empty: the default
        assert result.returncode == 0 and ran.exists()
        return
    assert result.returncode == 2 and "HPCML_STOP_GRACE" in result.stderr and not ran.exists()
    with pytest.raises(RecipeError, match="HPCML_STOP_GRACE"):
        runner.run_logged(["touch", ran], tmp_path / "log", env=env)
    assert not ran.exists()


# --- run_logged in a builder process that is interrupted, terminated or killed --------------

HARNESS = """
import signal, sys
from builder import runner
if sys.argv[1] == "exception":          # SIGTERM as an exception, as a Ctrl-C is
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
runner.run_logged(["bash", "-c", sys.argv[2], sys.argv[3]], sys.argv[4], cleanup=sys.argv[5:])
"""

WAYS = {
    "SIGINT": (signal.SIGINT, "default"),  # KeyboardInterrupt: run_logged stops it
    "SIGTERM-handled": (signal.SIGTERM, "exception"),  # SystemExit: the same
    "SIGTERM": (signal.SIGTERM, "default"),  # the builder dies: the kernel tells the guard
    "SIGKILL": (signal.SIGKILL, "default"),
}


@pytest.mark.parametrize("command, names", COMMANDS.values(), ids=COMMANDS.keys())
@pytest.mark.parametrize("sig, handling", WAYS.values(), ids=WAYS.keys())
def test_a_stopped_builder_leaves_nothing_running_and_no_temp_files(
    tmp_path, marker, temps, sig, handling, command, names
):
    log = tmp_path / "log"
    builder = subprocess.Popen(
        [sys.executable, "-c", HARNESS, handling, command, marker, log, *temps],
        cwd=ROOT,
        env=grace_env(),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,  # SIGINT: a `make test &` starts this process with it ignored
    )
    try:
        assert wait_until(started(marker, names), 30), log.read_text()
        began = time.monotonic()
        builder.send_signal(sig)
        builder.communicate(timeout=BOUND)
    finally:
        builder.kill()
    assert builder.returncode != 0
    assert_all_stopped(marker, temps, began)
    assert "build-guard: stopping the command" in log.read_text()


def test_a_timeout_stops_the_command_and_says_so(tmp_path, marker, temps):
    began = time.monotonic()
    with pytest.raises(ToolError, match=r"^sleeper did not finish within 1 s and was stopped"):
        runner.run_logged(
            ["bash", "-c", SPAWNS, marker], tmp_path / "log", env=grace_env(), what="sleeper", cleanup=temps, timeout=1
        )
    assert time.monotonic() - began >= 1
    assert_all_stopped(marker, temps, began)


def test_a_stuck_guard_is_killed_with_the_command_group(tmp_path, marker, temps, monkeypatch):
    # the command stops the guard (its parent): only this process's last resort is left
    monkeypatch.setattr(runner, "STOP_MARGIN_S", 1)
    command = 'kill -STOP "$PPID"; ' + SPAWNS
    began = time.monotonic()
    with pytest.raises(ToolError, match="did not finish within 1 s"):
        runner.run_logged(["bash", "-c", command, marker], tmp_path / "log", env=grace_env(), cleanup=temps, timeout=1)
    assert wait_until(lambda: not marked(marker), BOUND - (time.monotonic() - began)), marked(marker)
    assert time.monotonic() - began < BOUND


def test_a_finished_command_is_waited_for_without_limit_by_default(tmp_path):
    log = tmp_path / "log"
    lines = []
    runner.run_logged(["sh", "-c", "echo one; sleep 1; echo two"], log, on_line=lines.append)
    assert lines == ["one", "two"] and log.read_text().endswith("one\ntwo\n")
    with pytest.raises(ToolError, match=r"(?s)^sh failed \(exit status 3\); last lines of .*\nthree$"):
        runner.run_logged(["sh", "-c", "echo three; exit 3"], log)


def test_lines_written_before_the_follower_starts_are_seen(tmp_path, monkeypatch):
    """The command shares the log's offset: output it writes at once (here: all of it, before
    run_logged goes on) still reaches on_line."""
    real = subprocess.Popen

    def finished_at_once(*args, **kwargs):
        process = real(*args, **kwargs)
        process.wait()
        return process

    monkeypatch.setattr(runner.subprocess, "Popen", finished_at_once)
    lines = []
    runner.run_logged(["sh", "-c", "echo first; echo second"], tmp_path / "log", on_line=lines.append)
    assert lines == ["first", "second"]


# --- run_attached shares the stop routine --------------------------------------------------


@pytest.mark.parametrize("command, names", COMMANDS.values(), ids=COMMANDS.keys())
def test_run_attached_stops_its_whole_group_on_timeout(marker, command, names):
    began = time.monotonic()
    with pytest.raises(ToolError, match="did not finish within 1 s"):
        runner.run_attached(["bash", "-c", command, marker], env=grace_env(), timeout=1)
    assert wait_until(lambda: not marked(marker), BOUND - (time.monotonic() - began)), marked(marker)
    assert GRACE <= time.monotonic() - began < BOUND


def test_run_attached_stops_a_grandchild_that_outlives_its_parent(marker):
    # the leader ends at TERM at once; what it started ignores TERM and must still be KILLed
    command = '(trap "" TERM; exec -a "$0-grandchild" sleep 301) & exec -a "$0-child" sleep 300'
    began = time.monotonic()
    with pytest.raises(ToolError, match="did not finish"):
        runner.run_attached(["bash", "-c", command, marker], env=grace_env(), timeout=1)
    assert wait_until(lambda: not marked(marker), BOUND - (time.monotonic() - began)), marked(marker)
