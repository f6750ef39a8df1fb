"""`make test`'s second pass as two streams side by side (pytest-xdist, `-n 2 --streams`): one
builds and packs images, the other runs them (Slurm clusters, the smoke suite, the examples,
the wrapper). Either alone leaves a core idle for much of its time: a build waits on its
downloads, a two-node job on its ranks (docs/performance.md#the-test-loops). A pytest plugin
the tests' conftest.py loads; standard library and pytest only, xdist where it is used.

- The stream of a test is the top folder of its file under tests/, so the controller, which
  collects nothing, can tell it from the test's id. Every test that starts a cluster lives in
  a run folder (`check_cluster_tests`, at every collection): two workers never start two.
- Files whose tests need no CPU image come first, so that the build stream has work of its own
  while the run stream builds that image (the workers build it one after the other).
- At the end the run names its slowest files, by the time of all their tests' phases: with two
  workers pytest's own per-file times are not printed.
"""

from collections import defaultdict
from pathlib import PurePosixPath

import pytest

# the top folders under tests/ whose tests run an image rather than build one
RUN_FOLDERS = frozenset({"cluster", "runtime", "examples", "wrappers"})
SLOWEST_FILES = 12


def stream_of(nodeid: str) -> str:
    parts = PurePosixPath(nodeid.split("::")[0]).parts
    return "run" if len(parts) > 2 and parts[1] in RUN_FOLDERS else "build"


def check_cluster_tests(items):
    """Stop the run in one line when a test that starts a cluster (marker ``cluster``) sits
    outside the run stream's folders: there a second worker could start a second cluster."""
    clusters = [item.nodeid for item in items if item.get_closest_marker("cluster")]
    misplaced = [nodeid for nodeid in clusters if stream_of(nodeid) != "run"]
    if misplaced:
        raise pytest.UsageError(
            f"{misplaced[0]} starts a Slurm cluster but sits outside {', '.join(sorted(RUN_FOLDERS))} under "
            "tests/: move it there, so that make test's run stream takes it"
        )


def pytest_addoption(parser):
    parser.addoption(
        "--streams",
        action="store_true",
        help="with -n 2: one worker takes the tests that build images, the other those that run them",
    )


def pytest_collection_modifyitems(config, items):
    needs_image = defaultdict(bool)
    for item in items:
        needs_image[item.path] |= "cpu_image" in item.fixturenames
    items.sort(key=lambda item: needs_image[item.path])  # stable: files and tests keep their order


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent where it is not installed
def pytest_xdist_make_scheduler(config, log):
    if not config.getoption("streams"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class StreamScheduling(LoadScopeScheduling):
        """xdist's scheduling by scope (each scope's tests in order, on one worker), the scope
        being the stream; as its LoadFileScheduling makes it the file."""

        def _split_scope(self, nodeid):
            return stream_of(nodeid)

    return StreamScheduling(config, log)


class FileTimes:
    def __init__(self):
        self.seconds = defaultdict(float)

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid.split("::")[0]] += report.duration

    def pytest_terminal_summary(self, terminalreporter):
        slowest = sorted(self.seconds.items(), key=lambda pair: -pair[1])[:SLOWEST_FILES]
        if slowest and not hasattr(terminalreporter.config, "workerinput"):
            terminalreporter.write_sep("=", "slowest files")
            for path, seconds in slowest:
                terminalreporter.write_line(f"{seconds:8.1f}s {path}")


def pytest_configure(config):
    config.pluginmanager.register(FileTimes(), "hpcml-file-times")
