"""The one door to outside programs: every external command goes through `run`, so
errors read the same everywhere and tests can watch what was run."""

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from importlib import resources

from . import contract
from .errors import RecipeError, ToolError

PR_SET_PDEATHSIG = 1
STOP_GRACE_S = 10  # TERM to KILL: time for apptainer to remove its own temporary folders
STOP_MARGIN_S = 20  # past the guard's grace: its own cleanup (rm -rf of a build's work files)
KILL_WAIT_S = 5  # a KILLed process ends at once, unless stuck in the kernel (hung I/O)
POLL_S = 0.1

INSTALL_HINTS = {"shellcheck": "apt-get install shellcheck"}


def run(argv, *, input=None, cwd=None, env=None, check=True, timeout=None):
    """Run ``argv`` and return the CompletedProcess (text mode, output captured)."""
    program = shutil.which(argv[0])
    if program is None:
        hint = INSTALL_HINTS.get(argv[0])
        raise ToolError(f"{argv[0]}: command not found" + (f"; install it with: {hint}" if hint else ""))
    try:
        result = subprocess.run(
            [program, *argv[1:]], input=input, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise ToolError(f"{argv[0]} did not finish within {timeout} s") from None
    if check and result.returncode != 0:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""]
        raise ToolError(f"{argv[0]} failed with exit status {result.returncode}: {last[0]}")
    return result


def run_logged(argv, log_path, *, cwd=None, env=None, what=None, note="", cleanup=(), on_line=None, timeout=None):
    """Run ``argv`` with its output appended to the file ``log_path``.

    A small guard process (build-guard.sh) runs the command in a process group of its own; the
    kernel signals the guard when this process dies, even by SIGKILL, and the guard then stops
    the command's whole group (TERM, then KILL after the grace period of ``stop_grace``) and
    deletes the ``cleanup`` paths. On Ctrl-C, or past ``timeout`` seconds (None: no limit; a
    build can take hours), this process asks the guard to do so. ``on_line`` sees each log
    line as it arrives. On failure: a ToolError with ``note``, the log's last lines and its path.
    """
    program = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if program is None:
        hint = INSTALL_HINTS.get(argv[0])
        raise ToolError(f"{argv[0]}: command not found" + (f"; install it with: {hint}" if hint else ""))
    grace = stop_grace(env)  # the guard reads the same variable from the same environment
    guard = resources.files(__package__).joinpath("build-guard.sh")
    with open(log_path, "a") as log:
        log.write(f"$ {' '.join(map(str, argv))}\n")
        log.flush()
        # where the command's output starts, taken before it runs: it shares this file's
        # offset, so a tell() after the start would skip what it wrote at once
        start = log.tell()
        # a group of its own: the last resort below KILLs it without hitting this process
        process = subprocess.Popen(
            ["bash", str(guard), *map(str, cleanup), "--", program, *argv[1:]],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        done = threading.Event()
        follower = None
        if on_line:
            follower = threading.Thread(target=_follow, args=(log_path, start, done, on_line), daemon=True)
            follower.start()
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop_group(process, grace + STOP_MARGIN_S)
            status = None
        except BaseException:  # Ctrl-C: the guard stops the command and cleans up
            _stop_group(process, grace + STOP_MARGIN_S)
            raise
        finally:
            done.set()
            if follower:
                follower.join(timeout=2)
    if status is None:
        raise ToolError(
            f"{what or argv[0]} did not finish within {timeout:g} s and was stopped{note}; "
            f"last lines of {log_path}:\n{tail(log_path)}"
        )
    if status != 0:
        raise ToolError(
            f"{what or argv[0]} failed (exit status {status}){note}; last lines of {log_path}:\n{tail(log_path)}"
        )


def run_attached(argv, *, env=None, timeout=None, grace=None):
    """Run ``argv`` on this terminal's output and return its exit status. Past ``timeout``
    seconds (or on Ctrl-C) its whole process group is stopped: TERM, then KILL after
    ``grace`` seconds (default: ``stop_grace``), so nothing it started is left behind."""
    program = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if program is None:
        raise ToolError(f"{argv[0]}: command not found")
    grace = stop_grace(env) if grace is None else grace
    process = subprocess.Popen(
        [program, *map(str, argv[1:])],
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_group(process, grace)
        raise ToolError(f"{argv[0]} did not finish within {timeout:g} s and was stopped") from None
    except BaseException:
        _stop_group(process, grace)
        raise


def stop_grace(env=None):
    """Seconds a stopped command has between TERM and KILL: HPCML_STOP_GRACE from ``env``
    (default: this process's environment), else STOP_GRACE_S."""
    value = (os.environ if env is None else env).get(contract.STOP_GRACE, "")
    if not value:
        return STOP_GRACE_S
    if not re.fullmatch(r"[0-9]{1,5}", value):  # the guard accepts the same, no more
        raise RecipeError(f"{contract.STOP_GRACE}={value!r}: expected a whole number of seconds")
    return int(value)


def _stop_group(process, patience):
    """Stop ``process``, the leader of a process group: TERM to the group, up to ``patience``
    seconds for all of it to end, then KILL to the group and to the groups of the leader's
    children (the guard starts its command in a session of its own)."""
    _signal_group(process.pid, signal.SIGTERM)
    if _wait_group(process, patience):
        return
    children = _children(process.pid)  # read before the KILL: then they belong to init
    for pgid in [process.pid, *children]:
        _signal_group(pgid, signal.SIGKILL)
    _wait_group(process, KILL_WAIT_S)


def _signal_group(pgid, sig):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _wait_group(process, seconds):
    """True once ``process`` has ended and its group has no live process left; polls for at
    most ``seconds``."""
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / POLL_S) + 2):
        if process.poll() is not None and not _group_alive(process.pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return False


def _group_alive(pgid):
    """Whether process group ``pgid`` has a process that is not a zombie: those have ended,
    though a slow init (in a container) can take seconds to reap them."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        names = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True  # no /proc to tell: the group is there
    for name in names:
        try:
            with open(f"/proc/{name}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue  # ended meanwhile
        fields = stat[stat.rfind(")") + 2 :].split()  # after "PID (COMMAND) "
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _children(pid):
    """The direct children of ``pid``; empty where the kernel does not list them."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except (OSError, ValueError):
        return []


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _follow(log_path, offset, done, on_line):
    with open(log_path, errors="replace") as log:
        log.seek(offset)
        partial = ""
        while True:
            line = log.readline()
            if line.endswith("\n"):
                on_line((partial + line).rstrip("\n"))
                partial = ""
            elif line:
                partial += line  # the rest of the line is not written yet
            elif done.is_set():  # the command has ended: all it wrote has been read
                if partial:
                    on_line(partial)
                return
            else:
                done.wait(0.5)


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:]).rstrip()
    except OSError:
        return ""
