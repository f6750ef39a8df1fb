"""builder/locking/changes.py: what `hpcml lock` prints of a lock it rewrites."""

from builder.lockfile import DebianLock, DebPackage, Pinned, PythonLock, Step
from builder.locking import changes


def deb_lock(**versions):
    packages = tuple(DebPackage(name.replace("_", "-"), version, "amd64") for name, version in sorted(versions.items()))
    return DebianLock("final", "bookworm", "amd64", ("main",), (), packages, pockets=("updates", "security"))


def test_a_moved_an_added_and_a_removed_package_are_a_line_each_in_name_order():
    old = deb_lock(apt="2.6.1", bash="5.2.15-2+b7", libexpat1="2.5.0-1+deb12u1")
    new = deb_lock(apt="2.6.2", bash="5.2.15-2+b7", curl="7.88.1-10+deb12u14")
    assert changes.report("debian-final.txt", old, new) == [
        "  debian-final.txt: 3 changes",
        "    apt 2.6.1 -> 2.6.2",
        "    curl 7.88.1-10+deb12u14 added",
        "    libexpat1 2.5.0-1+deb12u1 removed",
    ]


def test_nothing_is_reported_for_a_new_lock_or_the_same_versions():
    lock = deb_lock(apt="2.6.1")
    assert changes.report("x", None, lock) == []
    assert changes.report("x", lock, deb_lock(apt="2.6.1")) == []


def test_python_pins_of_every_step_are_compared():
    def python_lock(*pins):
        return PythonLock("cpu", "3.11", "x86_64-manylinux_2_36", (Step("torch", "torch", pins),))

    old = python_lock(Pinned("torch", "2.12.0", ("a" * 64,)), Pinned("numpy", "2.4.6", ("b" * 64,)))
    new = python_lock(Pinned("torch", "2.13.0", ("c" * 64,)), Pinned("numpy", "2.4.6", ("b" * 64,)))
    assert changes.report("python.txt", old, new) == ["  python.txt: 1 change", "    torch 2.12.0 -> 2.13.0"]
    assert changes.versions("not a lock") == {}
