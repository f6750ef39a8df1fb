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
