"""make test's second pass runs as two streams (tests/helpers/streams.py): these check, with the
real pytest-xdist, that each stream's tests go to one worker in their order, that files which
need no CPU image come first, and that every test starting a cluster is in the run stream."""

import subprocess
import sys
from collections import defaultdict

import pytest
from conftest import ROOT
from helpers import streams

CONFTEST = """
import os
import pytest

pytest_plugins = ("helpers.streams",)


@pytest.fixture
def cpu_image():
    return None


@pytest.fixture(autouse=True)
def record(request):
    yield
    with open(os.environ["RECORD"], "a") as log:
        log.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {request.node.nodeid}\\n")
"""


def write_tree(root):
    tests = {
        "tests/builder/test_build_a.py": ["def test_a1(cpu_image): pass", "def test_a2(cpu_image): pass"],
        "tests/images/test_arm.py": ["def test_b1(): pass"],
        "tests/cluster/test_nodes.py": [f"def test_c{n}(cpu_image): pass" for n in range(1, 5)],
        "tests/wrappers/test_wrap.py": ["def test_d1(): pass"],
    }
    for path, bodies in tests.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("\n\n".join(bodies) + "\n")
    (root / "tests" / "conftest.py").write_text(CONFTEST)


def test_each_stream_runs_on_one_worker_in_order_and_files_without_the_image_come_first(tmp_path):
    write_tree(tmp_path)
    record = tmp_path / "record.txt"
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--streams", "-q", "tests"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT / "tests"), "RECORD": str(record), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "slowest files" in ran.stdout and "tests/cluster/test_nodes.py" in ran.stdout
    by_worker = defaultdict(list)
    for line in record.read_text().splitlines():
        worker, nodeid = line.split()
        by_worker[worker].append(nodeid.split("::")[1])
    assert sorted(by_worker.values()) == [
        ["test_b1", "test_a1", "test_a2"],  # build: tests/images needs no CPU image, so it comes first
        ["test_d1", "test_c1", "test_c2", "test_c3", "test_c4"],  # run
    ]


class FakeItem:
    def __init__(self, nodeid, marker=None):
        self.nodeid, self.marker = nodeid, marker

    def get_closest_marker(self, name):
        return name if name == self.marker else None


def test_every_test_that_starts_a_cluster_is_in_the_run_stream(request):
    """Two workers must never start two clusters: the cluster fixtures' tests all go to one.
    conftest.py checks each collection; this one collected the whole tree before -m chose."""
    assert request.config.pluginmanager.hasplugin("helpers.streams")
    fine = [FakeItem("tests/cluster/test_x.py::test_y", "cluster"), FakeItem("tests/builder/test_z.py::test_w")]
    streams.check_cluster_tests(fine)
    misplaced = FakeItem("tests/builder/test_z.py::test_slurm", "cluster")
    with pytest.raises(pytest.UsageError, match=r"^tests/builder/test_z.py::test_slurm starts a Slurm cluster"):
        streams.check_cluster_tests([*fine, misplaced])


def test_the_stream_is_the_top_folder_under_tests():
    assert streams.stream_of("tests/cluster/test_x.py::test_y[a/b]") == "run"
    assert streams.stream_of("tests/runtime/smoke/test_smoke.py::test_z") == "run"
    assert streams.stream_of("tests/builder/cluster/test_x.py::test_y") == "build"
    assert streams.stream_of("tests/test_top.py::test_y") == "build"
