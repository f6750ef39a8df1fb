"""What a layer build's log tells its user: the steps as they start, and the reason a block's
own line gave when it failed the build."""

from .. import contract

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
