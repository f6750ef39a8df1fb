import fcntl
import functools
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

# make test-gpu's options and summary (standard library only, as this file: a GPU host runs
# them); make test's two streams and the slowest files
pytest_plugins = ("helpers.gpu_summary", "helpers.streams")

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / "recipes"
CONTAINERS = ROOT / "containers"
GOLDEN = Path(__file__).resolve().parent / "golden"
LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")  # Debian's lmod: sourced by a login shell
# targets that render their own files; an alias (alias_of) names another target's image
TARGETS = sorted(path.stem for path in (RECIPES / "targets").glob("*.yaml") if "alias_of:" not in path.read_text())


# What a test needs, read from the fixtures it uses (directly or through others): `make unit`
# runs the tests that need none of these. `tools`: the real tools rather than our code with a
# fake runner (pip and uv installing into fresh venvs, every documented command in a fresh
# shell), which `make test` runs and `make unit` leaves out to stay fast (docs/testing.md#layout-and-markers).
NEEDS = {
    "image": {"cpu_image", "apptainer"},
    "cluster": {"slurm", "two_nodes", "twin", "site_file"},
    "tools": {"pristine", "installed_builder", "lower_packages"},
}


# Files whose tests mostly wait (timeouts, grace periods, stuck children: a second of wall for
# a tenth of CPU): they run first, so that their waits overlap the others' CPU work instead of
# ending the run on idle cores (docs/performance.md).
WAITING_FILES = (
    "tests/builder/test_runner.py",
    "tests/builder/test_child_signals.py",
    "tests/wrappers/test_wrapper_faults.py",
    "tests/cluster/test_two_nodes.py",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        used = set(item.fixturenames)
        for marker, fixtures in NEEDS.items():
            if fixtures & used:
                item.add_marker(marker)
    waiting = {ROOT / name for name in WAITING_FILES}
    items.sort(key=lambda item: item.path not in waiting)  # stable: the rest keep their order
    from helpers.streams import check_cluster_tests  # loaded as a plugin by now, so rewritten

    check_cluster_tests(items)  # every run, before -m leaves any out


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/ from the current output instead of comparing",
    )


# The first bytes of a SIF file (its launch line, then the magic at byte 32): a stand-in
# image for tests whose runtime is a recorder, which the wrapper takes for an image.
SIF_HEADER = b"#!/usr/bin/env run-singularity\n\0SIF_MAGIC\x0001\0"


@pytest.fixture
def update_golden(request):
    return request.config.getoption("--update-golden")


@functools.cache
def recipe_tree():
    """The repository's recipe tree, loaded once per process: the `tree` fixture and the test
    modules that read it at import time share it (each load is about 50 ms, in each worker)."""
    from builder.recipes.tree import RecipeTree

    return RecipeTree(RECIPES)


@pytest.fixture(scope="session")
def tree():
    return recipe_tree()


def run_builder(*args, cwd=ROOT, env=None, timeout=120):
    """Run the CLI as a user does, in a fresh interpreter."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "builder", *map(str, args)],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def tmpfs(path: Path, options: str):
    """A real small disk at ``path`` (root): `mount -t tmpfs -o OPTIONS`, unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True, timeout=30)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True, timeout=30)


def run_shared_folder(tmp_path_factory, name) -> Path:
    """A folder made once per run, also when pytest-xdist's workers share the tests: in the
    run's own temporary folder, above each worker's (the first to take its lock fills it)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@contextmanager
def run_lock(tmp_path_factory, name):
    """An exclusive lock on the run's folder ``name`` (run_shared_folder), held while the block
    runs: pytest-xdist's workers pass it one at a time. Yields the folder."""
    folder = run_shared_folder(tmp_path_factory, name)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder


def wait_until(predicate, seconds, step=0.2):
    """Poll ``predicate`` for at most ``seconds`` (and as many polls); its last answer."""
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / step) + 1):
        if predicate():
            return True
        if time.monotonic() >= deadline:
            break
        time.sleep(step)
    return predicate()


def run_runtime_module(module, *args, env=None, timeout=120):
    """``python -m MODULE ARGS`` of the in-image runtime package, from its source folder."""
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=ROOT / "runtime",
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def flocks(path: Path) -> list:
    """The flock() locks on this file as /proc/locks lists them, each "READ" or "WRITE" for
    one held, "-> READ"/"-> WRITE" for one a process is blocked waiting for. Reading them
    never takes a lock, so a probe cannot make a lock attempt of the code under test fail."""
    inode = os.stat(path).st_ino
    found = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "FLOCK" in fields and any(f.endswith(f":{inode}") and f.count(":") == 2 for f in fields):
            mode = fields[fields.index("FLOCK") + 2]
            found.append(f"-> {mode}" if "->" in fields else mode)
    return found


def compare_golden(path: Path, text: str, update: bool):
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"{path} missing; run pytest --update-golden"
    assert text == path.read_text(), f"{path} differs; review and run pytest --update-golden"


@pytest.fixture(scope="session")
def apptainer(tmp_path_factory):
    """The installed apptainer or singularity, else the toolbox's, provisioned here (root) as
    a build would: one worker at a time, as a provision replaces the toolbox's folder."""
    from builder.host.progress import Progress
    from builder.host.which_apptainer import find_apptainer

    with run_lock(tmp_path_factory, "toolbox") as folder:
        return find_apptainer(None, Progress(), folder)[0]


@pytest.fixture(scope="session")
def cpu_image(apptainer, tmp_path_factory):
    """The real CPU image, built with Apptainer into a fresh images directory; its layers
    come from the user's layer cache when this machine built them before (a clean machine
    builds them, about 15 minutes on 2 cores). pytest-xdist's workers build one after the
    other: the builder refuses a second build of a layer under way, and the later worker
    takes the layers from the cache."""
    images = tmp_path_factory.mktemp("images")
    started = time.monotonic()
    with run_lock(tmp_path_factory, "cpu-image"):
        result = run_builder("build", "cpu", "--images", images, timeout=3600)
    assert result.returncode == 0, result.stderr[-3000:]
    print(f"\ncpu image ready in {time.monotonic() - started:.0f} s:\n{result.stderr}", file=sys.stderr)
    return images / "cpu.sif"


@pytest.fixture(scope="session")
def tiny_image(apptainer, tmp_path_factory):
    """A 1 MB busybox image to build layers on (helpers/tiny_image.py)."""
    from helpers import tiny_image

    return tiny_image.build(apptainer, tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def arm_image(apptainer):
    """A small aarch64 image with Python 3 and g++, built here under QEMU (helpers/arm_image.py)."""
    from helpers import arm_image

    return arm_image.ready(apptainer)


@pytest.fixture(scope="session")
def deepspeed_source(tree, tmp_path_factory):
    """DeepSpeed's pinned source tree, unpacked from its sdist (helpers/deepspeed_source.py)."""
    from helpers import deepspeed_source

    version = tree.target("cpu").deepspeed.version
    return deepspeed_source.unpacked(version, tmp_path_factory.mktemp("download"), tmp_path_factory.mktemp("ds"))


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A real one-node Slurm cluster (munged, slurmctld, slurmd) with private ports."""
    from helpers.slurm_cluster import Cluster

    cluster = Cluster(tmp_path_factory.mktemp("slurm")).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def two_nodes(tmp_path_factory):
    from helpers.twonode_cluster import TwoNodes

    cluster = TwoNodes(tmp_path_factory.mktemp("two-nodes"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def site_file(two_nodes):
    """The local site for this cluster (TwoNodes.site_file) with a bind, a variable and a
    library path on multi-node jobs that are harmless to observe."""
    bind = two_nodes.root / "multi-node-bind"
    bind.mkdir()
    return two_nodes.site_file(
        HPCML_MULTI_NODE_BINDS=f"({bind}:/hpcml-multi-node-bind)",  # /tmp is bound anyway
        HPCML_MULTI_NODE_ENV="'HPCML_TEST_MULTI_NODE=applied'",
        HPCML_MULTI_NODE_LIBRARY_PATH="(/opt/hpcml-test-lib)",
    )


@pytest.fixture(scope="module")
def smoked(cpu_image, apptainer):
    """The CPU image with a passing smoke report beside it, as `make smoke` leaves it."""
    from builder import runner

    result = run_builder("smoke", "cpu", "--images", cpu_image.parent, env={"HPCML_APPTAINER": apptainer}, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = cpu_image.parent / "cpu.smoke"
    recorded = (report / "image.sha256").read_text().split()
    assert recorded == [runner.run(["sha256sum", str(cpu_image)]).stdout.split()[0], "cpu.sif"]
    return cpu_image


@pytest.fixture(scope="module")
def environment_modules(tmp_path_factory):
    """Environment Modules 5 (Tcl) unpacked from Debian's package: it conflicts with lmod as
    an installed package, but its modulecmd.tcl runs from any folder with Lmod's tclsh."""
    from helpers import debs

    from builder import runner

    root = tmp_path_factory.mktemp("envmodules")
    runner.run(["dpkg-deb", "-x", str(debs.downloaded("environment-modules")), str(root)])
    return next(root.rglob("modulecmd.tcl"))
