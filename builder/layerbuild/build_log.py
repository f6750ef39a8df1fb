"""What a layer build's log tells its user: the steps as they start, and the reason a block's
own line gave when it failed the build, or the folder that filled."""

import contextlib

from .. import contract, runner
from ..errors import ToolError
from ..host import space

STEP_MARKERS = (
    "--- devel: ",
    "--- base: ",
    "--- build: ",
    "--- final: ",
    "--- test: ",
    "--- unprivileged: ",  # layerbuild/unpacked.py's own steps
    "INFO:    Creating SIF",
    "INFO:    Running testscript",
    "INFO:    Starting build",
)


def failure_line(log_text: str):
    """The reason a block's lines gave for failing the build, for users: the last line that
    starts with contract.FAILURE_MARKER, less the marker (sh -x's "+ echo ..." of it does
    not start with it); None when there is none."""
    marked = [line for line in log_text.splitlines() if line.startswith(contract.FAILURE_MARKER)]
    return marked[-1][len(contract.FAILURE_MARKER) :].strip() if marked else None


def progress_lines(progress):
    """An on_line for runner.run_logged: each step's banner, and Apptainer's, as a progress step."""

    def on_line(line):
        text = line.strip()
        if text.startswith(STEP_MARKERS):
            progress.step(text.replace("INFO:    ", "").rstrip("."))

    return on_line


@contextlib.contextmanager
def said_in_one_line(log, where, what):
    """A failure of ``what`` (logged in ``log``) in one line: the folder of ``where``
    (space.Folders) that filled, or the reason a block gave; else the failure as it is."""
    try:
        yield
    except ToolError as error:
        last = f"{runner.tail(log, 40)}\n{error}"
        full = space.full_folder(last, where)
        if full is not None:
            raise ToolError(
                f"{what} {space.ran_out(*full)}; the previous image, if any, "
                f"is unchanged and the partial files are removed; log: {log}"
            ) from error
        reason = failure_line(last)
        if reason is None:
            raise
        raise ToolError(f"{reason}; the previous image, if any, is unchanged; log: {log}") from error
