"""The one door to outside programs: every external command goes through `run`, so
errors read the same everywhere and tests can watch what was run."""

import ctypes
import os
import shutil
import signal
import subprocess
import threading
from importlib import resources

from .errors import ToolError

PR_SET_PDEATHSIG = 1

INSTALL_HINTS = {"shellcheck": "apt-get install shellcheck"}


def run(argv, *, input=None, cwd=None, env=None, check=True, timeout=None):
    """Run ``argv`` and return the CompletedProcess (text mode, output captured)."""
    program = shutil.which(argv[0])
    if program is None:
        hint = INSTALL_HINTS.get(argv[0])
        raise ToolError(f"{argv[0]}: command not found" + (f"; install it with: {hint}" if hint else ""))
    try:
        result = subprocess.run([program, *argv[1:]], input=input, cwd=cwd, env=env,
                                capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ToolError(f"{argv[0]} did not finish within {timeout} s") from None
    if check and result.returncode != 0:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""]
        raise ToolError(f"{argv[0]} failed with exit status {result.returncode}: {last[0]}")
    return result


def run_logged(argv, log_path, *, cwd=None, env=None, what=None, note="", cleanup=(),
               on_line=None):
    """Run ``argv`` with its output appended to the file ``log_path``.

    A small guard process (build-guard.sh) runs the command; the kernel signals the guard
    when this process dies, even by SIGKILL, and the guard then stops the command and deletes
    the ``cleanup`` paths. ``on_line`` sees each log line as it arrives. On failure: a
    ToolError with ``note``, the log's last lines and its path.
    """
    program = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if program is None:
        hint = INSTALL_HINTS.get(argv[0])
        raise ToolError(f"{argv[0]}: command not found" + (f"; install it with: {hint}" if hint else ""))
    guard = resources.files(__package__).joinpath("build-guard.sh")
    with open(log_path, "a") as log:
        log.write(f"$ {' '.join(map(str, argv))}\n")
        log.flush()
        process = subprocess.Popen(["bash", str(guard), *map(str, cleanup), "--", program, *argv[1:]],
                                   cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        done = threading.Event()
        follower = None
        if on_line:
            follower = threading.Thread(target=_follow, args=(log_path, log.tell(), done, on_line),
                                        daemon=True)
            follower.start()
        try:
            status = process.wait()
        except BaseException:          # Ctrl-C, SIGTERM: the guard stops the command and cleans up
            process.send_signal(signal.SIGTERM)
            process.wait()
            raise
        finally:
            done.set()
            if follower:
                follower.join(timeout=2)
    if status != 0:
        raise ToolError(f"{what or argv[0]} failed (exit status {status}){note}; last lines of "
                        f"{log_path}:\n{tail(log_path)}")


def run_attached(argv, *, env=None, timeout=None, grace=10):
    """Run ``argv`` on this terminal's output and return its exit status. Past ``timeout``
    seconds (or on Ctrl-C) its whole process group is stopped: TERM, then KILL after
    ``grace`` seconds, so nothing it started is left behind."""
    program = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if program is None:
        raise ToolError(f"{argv[0]}: command not found")
    process = subprocess.Popen([program, *map(str, argv[1:])], env=env, stdin=subprocess.DEVNULL,
                               start_new_session=True, preexec_fn=_die_with_parent)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_group(process, grace)
        raise ToolError(f"{argv[0]} did not finish within {timeout:g} s and was stopped") from None
    except BaseException:
        _stop_group(process, grace)
        raise


def _stop_group(process, grace):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _follow(log_path, offset, done, on_line):
    with open(log_path, errors="replace") as log:
        log.seek(offset)
        while True:
            line = log.readline()
            if line:
                on_line(line.rstrip("\n"))
            elif done.wait(0.5):
                return


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:]).rstrip()
    except OSError:
        return ""
