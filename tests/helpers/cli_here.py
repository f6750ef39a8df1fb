"""The builder's command line run inside the test's own interpreter.

`python -m builder ARGS` is `sys.exit(builder.cli.main(ARGS))` after a dependency check, so
calling main() here gives the same exit status and output for a fraction of a fresh
interpreter's start-up (about 0.25 CPU-s a call, which the unit loop paid hundreds of times).
Output is caught at the file descriptors, so what child processes print is caught too; the
working folder, the environment and sys.argv are set for the call and put back after it. The
recipe tree a call loads is kept for the next call while the recipe files stay the same.

What only a fresh interpreter shows stays with conftest.run_builder: the dependency check,
import-time failures, signals, several builders at once, the installed `hpcml` script.
tests/builder/test_cli_here.py checks that both ways give the same results.
"""

import hashlib
import os
import subprocess
import sys
import tempfile
import traceback
from contextlib import contextmanager
from pathlib import Path

from builder import cli
from builder.cli import command
from builder.host import hostinfo
from builder.host import pip_indexes as indexes
from builder.recipes.tree import RecipeTree

ROOT = Path(__file__).resolve().parents[2]
# read once per process by design (a build asks for each for every layer); a user's every
# command is a new process, so every call here starts without them
_PER_PROCESS = (hostinfo.pip_settings, indexes.why_down)


def run_here(*args, cwd=ROOT, env=None) -> subprocess.CompletedProcess:
    """``python -m builder ARGS`` in ``cwd`` with ``env`` added to the environment, as
    conftest.run_builder returns it."""
    argv = [str(arg) for arg in args]
    for cached in _PER_PROCESS:
        cached.cache_clear()
    with _captured() as output, _environment(env), _working_folder(cwd), _argv(argv), _trees_kept():
        status = _call(argv)
    stdout, stderr = output
    return subprocess.CompletedProcess(["python", "-m", "builder", *argv], status, stdout(), stderr())


def _call(argv) -> int:
    try:
        status = cli.main(argv)
    except SystemExit as done:  # argparse's errors and --help
        if done.code is None or isinstance(done.code, int):
            return done.code or 0
        print(done.code, file=sys.stderr)
        return 1
    except Exception:  # noqa: BLE001 - a fresh interpreter would print the traceback and exit 1
        traceback.print_exc()
        return 1
    return status if isinstance(status, int) else 0


@contextmanager
def _captured():
    """fds 1 and 2 (and sys.stdout/sys.stderr on them) into two temporary files; yields two
    functions that read them once the call is over."""
    files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    saved_fds = [os.dup(1), os.dup(2)]
    saved_streams = sys.stdout, sys.stderr
    texts = ["", ""]
    for stream in saved_streams:
        stream.flush()
    try:
        for fd, file in zip((1, 2), files):
            os.dup2(file.fileno(), fd)
        sys.stdout = open(1, "w", closefd=False, buffering=1, encoding="utf-8", errors="replace")
        sys.stderr = open(2, "w", closefd=False, buffering=1, encoding="utf-8", errors="replace")
        yield (lambda: texts[0]), (lambda: texts[1])
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = saved_streams
        for fd, saved in zip((1, 2), saved_fds):
            os.dup2(saved, fd)
            os.close(saved)
        for index, file in enumerate(files):
            file.seek(0)
            texts[index] = file.read().decode("utf-8", errors="replace")
            file.close()


@contextmanager
def _environment(extra):
    saved = dict(os.environ)
    os.environ.update({key: str(value) for key, value in (extra or {}).items()})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _working_folder(folder):
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


# (recipes as given, its real path, its files' digest) -> the RecipeTree loaded from them
_TREES = {}
_TREES_KEPT = 8  # the tests' own recipes, and the last few copies a test changed


def _tree_of(recipes):
    """The recipe tree as a fresh interpreter would load it, loaded again only when a file
    under the folder changed (by content, not by time: a test may rewrite a file within the
    file system's clock tick). Loading the tree is most of an in-process command's time."""
    folder = Path(recipes)
    if not folder.is_dir():
        return RecipeTree(recipes)  # its error, every time
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(f"{path.relative_to(folder)}\0".encode() + path.read_bytes() + b"\0")
    key = (str(recipes), str(folder.resolve()), digest.hexdigest())
    if key not in _TREES:
        _TREES[key] = RecipeTree(recipes)
        while len(_TREES) > _TREES_KEPT:
            del _TREES[next(iter(_TREES))]
    return _TREES[key]


@contextmanager
def _trees_kept():
    saved = command.RecipeTree
    command.RecipeTree = _tree_of
    try:
        yield
    finally:
        command.RecipeTree = saved


@contextmanager
def _argv(argv):
    # the program names itself from argv[0] (invocation.program), as under `python -m builder`
    saved = sys.argv
    sys.argv = [str(ROOT / "builder" / "__main__.py"), *argv]
    try:
        yield
    finally:
        sys.argv = saved
