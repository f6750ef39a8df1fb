"""builder/lockfile.py: the Python lock's format, its reader, and the platform it is for;
the Debian lock's."""

import dataclasses
import shutil

import pytest
from conftest import ROOT
from helpers.cli_here import run_here

from builder import lockfile
from builder.errors import RecipeError

TEXT = """# Python lock of target demo, written by `hpcml lock demo`; do not edit by hand.
# platform: python 3.11, x86_64-manylinux_2_36
# step python: setuptools==80.9.0
setuptools==80.9.0 --hash=sha256:{a}  # setuptools-80.9.0-py3-none-any.whl
# step torch: torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu
torch==2.13.0+cpu --hash=sha256:{b} --hash=sha256:{c}  # x.whl, y.whl
filelock==4.3.1 --hash=sha256:{a}
""".format(a="a" * 64, b="b" * 64, c="c" * 64)


def test_what_text_writes_parse_reads_back_and_pip_reads_each_line():
    lock = lockfile.parse(TEXT, "demo", "demo.txt")
    assert (lock.python, lock.platform) == ("3.11", "x86_64-manylinux_2_36")
    assert [step.name for step in lock.steps] == ["python", "torch"]
    torch = lock.step("torch")
    assert torch.asked == "torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu"
    assert torch.pins[0] == lockfile.Pinned("torch", "2.13.0+cpu", ("b" * 64, "c" * 64), ("x.whl", "y.whl"))
    assert torch.pins[0].requirement() == f"torch==2.13.0+cpu --hash=sha256:{'b' * 64} --hash=sha256:{'c' * 64}"
    again = lockfile.parse(lock.text("hpcml lock demo"), "demo", "demo.txt")
    assert again.steps == lock.steps and again.platform == lock.platform


@pytest.mark.parametrize(
    "line, expected",
    [
        ("torch==2.13.0", "expected NAME==VERSION --hash=sha256:HEX"),
        ("torch>=2.13.0 --hash=sha256:" + "a" * 64, "expected NAME==VERSION"),
        ("torch==2.13.0 --hash=sha256:abc", "expected NAME==VERSION"),
    ],
)
def test_a_line_hpcml_lock_would_not_write_is_one_line_naming_file_and_line(line, expected):
    with pytest.raises(RecipeError) as caught:
        lockfile.parse(TEXT + line + "\n", "demo", "recipes/locks/demo/python.txt")
    message = str(caught.value)
    assert message.startswith("recipes/locks/demo/python.txt:8: not a line of a lock")
    assert expected in message and "\n" not in message


def test_a_pin_before_any_step_and_a_missing_platform_are_refused():
    with pytest.raises(RecipeError, match=r"python.txt:1: .*a '# step NAME: ...' line first"):
        lockfile.parse("six==1.17.0 --hash=sha256:" + "a" * 64 + "\n", "demo", "python.txt")
    with pytest.raises(RecipeError, match="no '# platform: python X.Y, PLATFORM' line"):
        lockfile.parse("# step python: six\n", "demo", "python.txt")


def test_every_debootstrap_target_has_the_platform_of_its_suite(tree):
    assert lockfile.platform_of(tree.target("cpu"), tree.versions.data) == ("3.11", "x86_64-manylinux_2_36")
    # trixie's glibc 2.41 is past uv's newest manylinux tag: 2_40 wheels are the newest there
    assert lockfile.platform_of(tree.target("gh200-cuda"), tree.versions.data) == ("3.13", "aarch64-manylinux_2_40")
    assert lockfile.platform_of(tree.target("lumi-laif"), tree.versions.data) is None


def test_a_lock_made_for_another_python_is_stale_for_the_whole_target(tree):
    target = tree.target("cpu")
    lock = lockfile.parse(TEXT.replace("python 3.11", "python 3.12"), "cpu", "python.txt")
    stale = lockfile.checked(lock, target, tree.versions.data)
    assert isinstance(stale, lockfile.StaleLock)
    assert "made for python 3.12 on x86_64-manylinux_2_36" in stale.message
    assert stale.message.endswith("refresh it with: hpcml lock cpu")
    assert lockfile.checked(lockfile.parse(TEXT, "cpu", "python.txt"), target, tree.versions.data) is not None


def test_the_committed_locks_are_what_the_tree_attaches():
    from builder.recipes.tree import RecipeTree

    tree = RecipeTree(ROOT / "recipes")
    for name in ("cpu", "a100-cuda", "h100-cuda", "v100-cuda", "csc-cuda", "gh200-cuda"):
        lock = tree.target(name).python_lock
        assert isinstance(lock, lockfile.PythonLock), name
        assert lock.steps and all(pin.hashes for step in lock.steps for pin in step.pins)
    # no lock where the torch index does not answer here: those resolve on the day they build
    assert tree.target("lumi-rocm").python_lock is None


def test_a_debian_lock_reads_back_what_it_wrote_and_names_a_bad_line(tmp_path):
    lock = lockfile.DebianLock(
        "final",
        "bookworm",
        "amd64",
        ("main", "non-free"),
        ("hostname", "python3"),
        (lockfile.DebPackage("bash", "5.2.15-2+b7", "amd64"), lockfile.DebPackage("tzdata", "2025b-0+deb12u1", "all")),
    )
    path = lockfile.debian_path_of(tmp_path, "cpu", "final")
    path.parent.mkdir(parents=True)
    path.write_text(lock.text("cpu", "hpcml lock cpu"))
    assert lockfile.load_debian(tmp_path, "cpu", "final") == dataclasses.replace(lock, path=str(path))
    assert lockfile.load_debian(tmp_path, "cpu", "build") is None
    path.write_text(path.read_text() + "bash 5.2\n")
    with pytest.raises(RecipeError, match=r"debian-final.txt:8: not a line of a Debian lock: 'bash 5.2'"):
        lockfile.load_debian(tmp_path, "cpu", "final")


def test_a_debian_line_holds_the_sha256_of_its_deb_and_an_old_line_without_it_still_reads(tmp_path):
    hashed = lockfile.DebPackage("bash", "5.2.15-2+b7", "amd64", "0123456789abcdef" * 4)
    old = lockfile.DebPackage("tzdata", "2025b-0+deb12u1", "all")
    assert hashed.line() == f"bash=5.2.15-2+b7 amd64 sha256:{'0123456789abcdef' * 4}"
    assert old.line() == "tzdata=2025b-0+deb12u1 all"
    lock = lockfile.DebianLock("final", "bookworm", "amd64", ("main",), ("python3",), (hashed, old))
    path = lockfile.debian_path_of(tmp_path, "cpu", "final")
    path.parent.mkdir(parents=True)
    path.write_text(lock.text("cpu", "hpcml lock cpu"))
    read = lockfile.load_debian(tmp_path, "cpu", "final")
    assert read.packages == (hashed, old) and read.packages[1].sha256 == ""


@pytest.mark.parametrize(
    "suffix",
    [
        " sha256:" + "a" * 63,  # a digit short
        " sha256:" + "A" * 64,  # upper case: the index and the lock write lower case
        " sha256:" + "a" * 65,
        " " + "a" * 64,  # no sha256: prefix
        " sha512:" + "a" * 64,
    ],
)
def test_a_debian_line_with_a_bad_hash_is_refused_in_one_line(tmp_path, suffix):
    path = lockfile.debian_path_of(tmp_path, "cpu", "build")
    path.parent.mkdir(parents=True)
    path.write_text(f"# debian: bookworm amd64 main\n# asked: python3\nbash=5.2.15-2+b7 amd64{suffix}\n")
    with pytest.raises(RecipeError) as caught:
        lockfile.load_debian(tmp_path, "cpu", "build")
    message = str(caught.value)
    assert message.startswith(f"{path}:3: not a line of a Debian lock: 'bash=5.2.15-2+b7 amd64")
    assert message.endswith("; expected NAME=VERSION ARCH sha256:HEX") and "\n" not in message


def test_every_committed_debian_lock_holds_the_sha256_of_each_deb():
    from builder.recipes.tree import RecipeTree

    tree = RecipeTree(ROOT / "recipes")
    for name in ("cpu", "a100-cuda", "h100-cuda", "v100-cuda", "csc-cuda", "gh200-cuda"):
        locks = tree.target(name).debian_locks
        assert sorted(lock.stage for lock in locks) == ["build", "final"], name
        assert all(len(p.sha256) == 64 for lock in locks for p in lock.packages), name


def test_check_names_a_debian_lock_whose_stage_asks_for_other_packages(tmp_path):
    recipes = shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    target = recipes / "targets" / "cpu.yaml"
    target.write_text(target.read_text().replace("final: [hostname]", "final: [hostname, less]"))
    result = run_here("check", "--recipes", recipes, "--out", ROOT / "containers", "--sites-out", tmp_path / "sites")
    assert result.returncode == 1
    assert f"stale: {recipes}/locks/cpu/debian-final.txt is stale; run: " in result.stderr
    assert "debian-build.txt" not in result.stderr  # the devel layer's stage asks as it did
