"""The one door to outside programs: every external command goes through `run`, so
errors read the same everywhere and tests can watch what was run."""

import shutil
import subprocess

from .errors import ToolError

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


def run_logged(argv, log, *, cwd=None, env=None, what=None):
    """Run ``argv`` with its output appended to the open file ``log``; on failure raise a
    ToolError quoting the log's last lines and its path."""
    program = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if program is None:
        hint = INSTALL_HINTS.get(argv[0])
        raise ToolError(f"{argv[0]}: command not found" + (f"; install it with: {hint}" if hint else ""))
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    process = subprocess.Popen([program, *argv[1:]], cwd=cwd, env=env, stdout=log,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        status = process.wait()
    except BaseException:
        # Ctrl-C or SIGTERM: stop the whole child group, not just the first process
        import os
        import signal
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        process.wait()
        raise
    if status != 0:
        log.flush()
        raise ToolError(f"{what or argv[0]} failed (exit status {status}); last lines of "
                        f"{log.name}:\n{tail(log.name)}")


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:]).rstrip()
    except OSError:
        return ""
