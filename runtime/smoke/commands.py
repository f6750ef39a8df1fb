"""The smoke suite's one door to other programs (ds_report, nvidia-smi, fi_info, rocminfo and
its own checks in child processes).

One rule for time: a program still running after its timeout is killed, and the caller gets
a result that says so (`timed_out`, worded by `late`) instead of an exception. A program that
cannot start raises OSError, as subprocess does; each caller says what that means for its
check. Output is captured as text; stdin is closed, so no child waits on a terminal.
"""

import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class Finished:
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    timeout_s: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def late(self) -> str:
        """How every check words a timeout."""
        return f"did not finish in {self.timeout_s:g} s"


def run(argv, timeout_s, env=None) -> Finished:
    """Run ``argv`` (with ``env``, default this process's) for at most ``timeout_s`` seconds."""
    try:
        done = subprocess.run(
            list(argv), env=env, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return Finished(None, "", "", timeout_s)
    return Finished(done.returncode, done.stdout, done.stderr, timeout_s)
