"""layerbuild/drift.py: before a layer is built, every file the lock names is still served,
asked with the real uv of a wheel folder of the test's own (helpers/pip_sources.py); a
release gone or replaced stops the build in one line, before anything is written."""

import dataclasses
import hashlib
import shutil

import pytest
from helpers.pip_sources import serve, wheel

from builder import lockfile
from builder.errors import RecipeError, ToolError
from builder.layerbuild import drift
from builder.render.layer_sharing import plan_layers


@pytest.fixture
def sources(tmp_path, monkeypatch):
    yield from serve(tmp_path, monkeypatch)


def locked(*files, step="extras"):
    """A target whose lock pins ``files`` (name-version-...whl) at their sha256."""
    pins = []
    for path in files:
        name, version = path.name.split("-")[:2]
        pins.append(lockfile.Pinned(name, version, (hashlib.sha256(path.read_bytes()).hexdigest(),)))
    lock = lockfile.PythonLock(
        "mini", "3.11", "x86_64-manylinux_2_36", (lockfile.Step(step, "alpha==1.0", tuple(pins)),), "locks/python.txt"
    )

    @dataclasses.dataclass
    class Target:
        name: str = "mini"
        python_lock: object = lock

    return Target()


def test_a_lock_whose_every_file_is_served_passes(sources):
    target = locked(wheel(sources, "alpha", "1.0", ["beta"]), wheel(sources, "beta", "1.2"))
    assert drift.check(target, down=[]) is None


def test_a_release_no_longer_served_is_one_line_with_the_locked_and_the_served_version(sources):
    target = locked(wheel(sources, "alpha", "1.0"), wheel(sources, "beta", "1.2"))
    (sources / "beta-1.2-py3-none-any.whl").unlink()  # a point release replaced it
    wheel(sources, "beta", "1.3")
    with pytest.raises(ToolError) as caught:
        drift.check(target, down=[])
    message = str(caught.value)
    assert message.startswith(
        "beta 1.2, locked in locks/python.txt (step extras), is not served by this build's pip sources "
        "(they serve beta 1.3); nothing was built. Lock again with: hpcml lock --update mini"
    )
    assert "mirror that keeps that release" in message and "\n" not in message
    assert message.endswith("while the lock was served: hpcml build mini --bundle DIR")


def test_the_same_release_served_as_another_file_is_refused(sources):
    target = locked(wheel(sources, "alpha", "1.0"))
    wheel(sources, "alpha", "1.0", ["something-new"])  # rebuilt under the same name: other bytes
    with pytest.raises(ToolError, match=r"^alpha 1.0, locked in .* is served as another file than the locked one"):
        drift.check(target, down=[])


def test_a_target_without_a_lock_asks_nothing(monkeypatch):
    monkeypatch.setattr(drift.uv, "compile_pylock", lambda *a, **k: pytest.fail("asked a source"))
    assert drift.check(dataclasses.replace(locked(), python_lock=None), down=[]) is None


# --- the Debian packages of the devel and base layers ------------------------------------------


@pytest.fixture
def cpu_tree(tmp_path):
    from conftest import RECIPES

    from builder.recipes.tree import RecipeTree

    return RecipeTree(shutil.copytree(RECIPES, tmp_path / "recipes"))


def test_a_mirror_that_serves_what_the_lock_says_passes(cpu_tree, monkeypatch):
    asked = []

    def served(tree, target, stage, mirror, security_mirror):
        asked.append(stage)
        return next(deb for deb in target.debian_locks if deb.stage == stage)

    monkeypatch.setattr(drift.debian, "resolve_stage", served)
    drift.check_debian(cpu_tree, plan_layers(cpu_tree, "cpu"), ["base", "image"])
    assert asked == ["final"]  # only the layers to build: the base layer's stage


def test_a_point_release_on_the_mirror_stops_the_build_naming_what_moved(cpu_tree, monkeypatch):
    def served(tree, target, stage, mirror, security_mirror):
        lock = next(deb for deb in target.debian_locks if deb.stage == stage)
        bash = next(p for p in lock.packages if p.name == "bash")
        moved = [dataclasses.replace(p, version=p.version + ".1") if p is bash else p for p in lock.packages]
        return dataclasses.replace(lock, packages=tuple(moved))

    monkeypatch.setattr(drift.debian, "resolve_stage", served)
    with pytest.raises(ToolError) as caught:
        drift.check_debian(cpu_tree, plan_layers(cpu_tree, "cpu"), ["devel"])
    message = str(caught.value)
    assert message.startswith("the Debian mirror no longer serves what ")
    assert "debian-build.txt locks (1 package: bash 5.2.15-2+b13 locked, 5.2.15-2+b13.1 served)" in message
    assert "nothing was built. Lock again with: hpcml lock --update cpu" in message
    assert "HPCML_MIRROR=SNAPSHOT-URL, and HPCML_SECURITY_MIRROR" in message and "\n" not in message
    assert message.endswith("made while they were served: hpcml build cpu --bundle DIR")


def test_the_same_version_served_as_another_deb_stops_the_build_naming_both_hashes(cpu_tree, monkeypatch):
    def served(tree, target, stage, mirror, security_mirror):
        lock = next(deb for deb in target.debian_locks if deb.stage == stage)
        rebuilt = [dataclasses.replace(p, sha256="cd34" * 16) if p.name == "bash" else p for p in lock.packages]
        return dataclasses.replace(lock, packages=tuple(rebuilt))

    monkeypatch.setattr(drift.debian, "resolve_stage", served)
    locked = next(p for p in cpu_tree.target("cpu").debian_locks[0].packages if p.name == "bash")
    with pytest.raises(ToolError) as caught:
        drift.check_debian(cpu_tree, plan_layers(cpu_tree, "cpu"), ["devel"])
    message = str(caught.value)
    assert (
        f"(1 package: bash 5.2.15-2+b13 locked as sha256:{locked.sha256[:12]}..., served as sha256:cd34cd34cd34...)"
        in message
    )
    assert "\n" not in message


def test_deb_moves_names_versions_and_hashes_and_takes_an_unhashed_lock_by_version():
    bash, old = lockfile.DebPackage("bash", "5.2", "amd64", "ab" * 32), lockfile.DebPackage("tzdata", "2025b", "all")
    assert drift._deb_moves([bash, old], [bash, dataclasses.replace(old, sha256="cd" * 32)]) == []
    assert drift._deb_moves([bash], [dataclasses.replace(bash, sha256="cd" * 32)]) == [
        "bash 5.2 locked as sha256:abababababab..., served as sha256:cdcdcdcdcdcd..."
    ]
    assert drift._deb_moves([bash], [dataclasses.replace(bash, version="5.3", sha256="cd" * 32), old]) == [
        "bash 5.2 locked, 5.3 served",  # the version says it: not the hash as well
        "tzdata not locked, 2025b served",
    ]


def test_a_debian_lock_without_hashes_does_not_fit_so_lock_and_the_build_resolve_it_again(cpu_tree, monkeypatch):
    from builder.locking import debian

    target = cpu_tree.target("cpu")
    lock = next(deb for deb in target.debian_locks if deb.stage == "final")
    assert debian.fits(lock, cpu_tree, target, "final")
    unhashed = tuple(dataclasses.replace(p, sha256="") if p.name == "bash" else p for p in lock.packages)
    old = dataclasses.replace(lock, packages=unhashed)
    assert not debian.fits(old, cpu_tree, target, "final")
    monkeypatch.setattr(drift.debian, "resolve_stage", lambda *a: pytest.fail("asked the mirror"))
    monkeypatch.setattr(cpu_tree, "target", lambda name: dataclasses.replace(target, debian_locks=(old,)))
    with pytest.raises(RecipeError) as caught:
        drift.check_debian(cpu_tree, plan_layers(cpu_tree, "cpu"), ["base"])
    assert "the lock is stale: it holds no sha256 of the .deb files; refresh it with: hpcml lock cpu" in str(
        caught.value
    )


def test_a_stage_that_asks_for_other_packages_than_its_lock_is_stale_before_the_mirror_is_asked(cpu_tree, monkeypatch):
    lock = cpu_tree.root + "/locks/cpu/debian-final.txt"
    text = open(lock).read()
    open(lock, "w").write(text.replace("# asked: ", "# asked: cowsay "))
    from builder.recipes.tree import RecipeTree

    tree = RecipeTree(cpu_tree.root)
    monkeypatch.setattr(drift.debian, "resolve_stage", lambda *a: pytest.fail("asked the mirror"))
    with pytest.raises(RecipeError) as caught:
        drift.check_debian(tree, plan_layers(tree, "cpu"), ["base"])
    assert str(caught.value).endswith("refresh it with: hpcml lock cpu") and "the lock is stale" in str(caught.value)


def test_without_apt_get_the_mirror_is_not_asked_and_the_build_says_who_checks(cpu_tree, monkeypatch):
    """A RHEL login node (issue 51): no resolver here; the layer's own apt-get installs exactly
    the locked versions, so a moved package still stops the build, inside it."""
    monkeypatch.setattr(drift.shutil, "which", lambda name: None if name == "apt-get" else "/usr/bin/" + name)
    monkeypatch.setattr(drift.debian, "resolve_stage", lambda *a: pytest.fail("asked the mirror"))
    said = []
    progress = type("Progress", (), {"step": lambda self, text: said.append(text)})()
    drift.check_debian(cpu_tree, plan_layers(cpu_tree, "cpu"), ["devel", "base"], progress)
    assert said == [
        "no apt-get here: the devel layer's own apt-get checks its Debian lock",
        "no apt-get here: the base layer's own apt-get checks its Debian lock",
    ]
