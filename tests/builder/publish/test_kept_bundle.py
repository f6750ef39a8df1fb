"""Publish keeps the way back (issue 66): `publish --bundle DIR` keeps the bundle's manifest beside
the image (bundle.SHA256SUMS, recorded in publish.json), `--with-bundle` the whole bundle as
bundle/; `verify` reads both back; `rebuild NAME/VERSION` builds the version's target again from
the kept bundle, or from a named one whose manifest is the kept one byte for byte, and compares.

Without Apptainer or an image: the runner is a fake (tests/helpers/fake_runner.py), and so are
the layer build and the image comparison of `rebuild` (the real ones: tests/images/
test_bundle_rebuild.py builds from a bundle, test_publish.py publishes the real image). The
bundle's check against the locks is the real one where a test says so; elsewhere it reads the
bundle's files back against its SHA256SUMS (every locked package is not here to be checked)."""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import RECIPES
from helpers.cli_here import run_here
from helpers.fake_runner import FakeRunner

from builder import sbom
from builder.bundle import make, manifest
from builder.errors import CheckFailed
from builder.layerbuild import layers
from builder.publish import install, kept_bundle, rebuild_check
from builder.publish import rebuild as rebuild_module

LOCKS = ("debian-build.txt", "debian-final.txt", "python.txt")
WHEEL = "python/big-1.0-py3-none-any.whl"


def write_bundle(folder: Path, files: dict) -> Path:
    for path, data in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    manifest.write(folder, {path: hashlib.sha256(data).hexdigest() for path, data in files.items()})
    return folder


def cpu_files() -> dict:
    """cpu's locks as the repository holds them, a wheel large enough to be linked, a .deb."""
    return {
        **{f"locks/cpu/{name}": (RECIPES / "locks" / "cpu" / name).read_bytes() for name in LOCKS},
        WHEEL: b"w" * (kept_bundle.LINK_FROM + 1),
        "debian/pool/main/b/bash/bash_5.2.15-2+b7_amd64.deb": b"a deb",
    }


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A built cpu image (a fake one the fake runner answers for), an existing prefix, a bundle
    of cpu's locks, the working folder an empty one."""
    FakeRunner(monkeypatch)
    # the fake image holds no package: the SBOM's proof that it holds its lock is not this test's
    monkeypatch.setattr(sbom, "_holds_its_lock", lambda target, image, found: found, raising=False)
    monkeypatch.setattr(install, "ready_apptainer", lambda site: "apptainer")
    monkeypatch.setattr(rebuild_module, "ready_apptainer", lambda site: "apptainer")
    images, prefix, work = tmp_path / "images", tmp_path / "appl" / "ml", tmp_path / "work"
    for folder in (images, prefix, work):
        folder.mkdir(parents=True)
    (images / "cpu.sif").write_bytes(b"a cpu image")
    bundle = write_bundle(tmp_path / "bundles" / "cpu", cpu_files())
    return tmp_path, images, prefix, work, bundle


@pytest.fixture
def read_back(monkeypatch):
    """make.checked as far as it can go here: every file read back against the SHA256SUMS."""
    monkeypatch.setattr(make, "checked", lambda tree, name, folder: manifest.check(Path(folder)))


def publish(site, *args):
    _, images, prefix, work, _ = site
    return run_here(
        "publish", "cpu", "--recipes", RECIPES, "--images", images, "--prefix", prefix,
        "--version", "1.0", "--skip-smoke", *args, cwd=work,
    )  # fmt: skip


def rebuild(site, *args):
    return run_here("rebuild", "pytorch/1.0", "--recipes", RECIPES, "--prefix", site[2], *args, cwd=site[3])


def verify(site):
    return run_here("verify", "pytorch/1.0", "--prefix", site[2])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listed(root: Path) -> dict:
    return {line.split("  ", 1)[1]: line.split("  ", 1)[0] for line in (root / "SHA256SUMS").read_text().splitlines()}


def test_publish_with_a_bundle_keeps_its_manifest_byte_for_byte_and_records_it(site, read_back):
    _, _, prefix, _, bundle = site
    result = publish(site, "--bundle", bundle)
    assert result.returncode == 0, result.stderr
    root = prefix / "pytorch" / "1.0"
    assert (root / "bundle.SHA256SUMS").read_bytes() == (bundle / "SHA256SUMS").read_bytes()
    assert not (root / "bundle").exists()
    recorded = json.loads((root / "publish.json").read_text())
    assert recorded["target"] == "cpu"
    assert recorded["bundle"] == {"manifest_sha256": sha256(bundle / "SHA256SUMS"), "files": 5, "whole": False}
    assert listed(root)["bundle.SHA256SUMS"] == sha256(bundle / "SHA256SUMS")
    checked = verify(site)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    said = (
        f"its manifest kept as bundle.SHA256SUMS (5 files, sha256 {sha256(bundle / 'SHA256SUMS')[:16]}...); "
        f"rebuild with: python -m builder rebuild pytorch/1.0 --prefix {prefix.resolve()} --bundle DIR"
    )
    assert f"  source bundle: {said}\n" in result.stdout
    assert checked.stdout.splitlines()[-1] == f"pytorch/1.0 source bundle: {said}"


def test_with_bundle_the_whole_bundle_is_kept_large_files_linked_and_sha256sum_checks_it(site, read_back):
    _, _, prefix, _, bundle = site
    result = publish(site, "--bundle", bundle, "--with-bundle")
    assert result.returncode == 0, result.stderr
    root = prefix / "pytorch" / "1.0"
    kept = root / "bundle"
    for path in [*cpu_files(), "SHA256SUMS"]:
        assert (kept / path).read_bytes() == (bundle / path).read_bytes(), path
        assert listed(root)[f"bundle/{path}"] == sha256(bundle / path)
    assert (kept / WHEEL).stat().st_ino == (bundle / WHEEL).stat().st_ino  # one file system, the publisher's
    assert (kept / "locks/cpu/python.txt").stat().st_ino != (bundle / "locks/cpu/python.txt").stat().st_ino
    assert json.loads((root / "publish.json").read_text())["bundle"]["whole"] is True
    assert subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=root).returncode == 0
    checked = verify(site)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.splitlines()[-1] == (
        f"pytorch/1.0 source bundle: kept whole in bundle/ (5 files); "
        f"rebuild with: python -m builder rebuild pytorch/1.0 --prefix {prefix.resolve()}"
    )


def test_without_bundle_publish_is_as_before_and_a_default_bundle_is_only_mentioned(site):
    tmp_path, _, prefix, work, bundle = site
    shutil.copytree(bundle, work / "bundles" / "cpu")  # bundles/<target> here: not taken unnamed
    result = publish(site)
    assert result.returncode == 0, result.stderr
    root = prefix / "pytorch" / "1.0"
    assert not (root / "bundle.SHA256SUMS").exists() and not (root / "bundle").exists()
    assert json.loads((root / "publish.json").read_text())["bundle"] is None
    assert "note: bundles/cpu is not kept with the image; publish --bundle bundles/cpu keeps its manifest" in (
        result.stdout
    )
    assert "  source bundle: none kept (no --bundle)\n" in result.stdout
    assert "source bundle" not in verify(site).stdout


def _refused(site, result, expected):
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [expected]
    assert list(site[2].iterdir()) == []  # nothing published, no folder made


def test_with_bundle_needs_a_bundle(site):
    result = publish(site, "--with-bundle")
    _refused(site, result, "error: command line: --with-bundle keeps the bundle --bundle DIR names; give both")


def test_a_bundle_of_another_lock_is_refused_in_one_line_and_nothing_is_published(site):
    bundle = write_bundle(site[0] / "other", {**cpu_files(), "locks/cpu/python.txt": b"# another lock\n"})
    result = publish(site, "--bundle", bundle, "--with-bundle")  # the real check against the locks
    _refused(
        site,
        result,
        f"error: command line: --bundle {bundle}: made for another {RECIPES}/locks/cpu/python.txt than this "
        f"checkout's; make it again with: hpcml bundle cpu --out {bundle}",
    )


def test_a_bundle_of_another_target_is_refused(site, read_back):
    bundle = write_bundle(site[0] / "other", {**cpu_files(), "locks/a100-cuda/python.txt": b"# its lock\n"})
    result = publish(site, "--bundle", bundle)
    _refused(
        site,
        result,
        f"error: command line: --bundle {bundle}: made for another target than cpu (it holds "
        "locks/a100-cuda/python.txt, locks/cpu/debian-build.txt, locks/cpu/debian-final.txt, locks/cpu/python.txt); "
        "make cpu's with: python -m builder bundle cpu --out DIR",
    )


def test_a_bundle_with_a_changed_file_is_refused(site, read_back):
    (site[4] / WHEEL).write_bytes(b"changed")
    result = publish(site, "--bundle", site[4])
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"error: command line: --bundle {site[4] / WHEEL}: its sha256 is ")
    assert list(site[2].iterdir()) == []


@pytest.mark.parametrize("whole", [False, True], ids=["manifest", "whole"])
def test_verify_fails_when_the_kept_manifest_is_changed_or_a_file_added_to_the_bundle(site, read_back, whole):
    assert publish(site, "--bundle", site[4], *(["--with-bundle"] if whole else [])).returncode == 0
    root = site[2] / "pytorch" / "1.0"
    with open(root / "bundle.SHA256SUMS", "ab") as kept:
        kept.write(b"0" * 64 + b"  python/added.whl\n")
    result = verify(site)
    assert result.returncode == 1
    assert f"FAIL {root}/bundle.SHA256SUMS: changed (sha256 differs; " in result.stdout
    if whole:
        (root / "bundle.SHA256SUMS").write_bytes((site[4] / "SHA256SUMS").read_bytes())
        (root / "bundle" / "python" / "added.whl").write_bytes(b"added")
        result = verify(site)
        assert result.returncode == 1
        assert result.stdout.splitlines() == [f"FAIL {root}/bundle/python/added.whl: not published (an added file)"]


class FakeBuild:
    """layers.build as rebuild calls it: records the call, writes the image it would make."""

    def __init__(self, monkeypatch, fail=False):
        self.calls, self.fail = [], fail
        monkeypatch.setattr(layers, "build", self)

    def __call__(self, tree, name, *, images, force=None, progress, space_check=True, bundle=None):
        self.calls.append({"target": name, "images": images, "force": force, "bundle": Path(bundle)})
        images.mkdir(parents=True, exist_ok=True)
        (images / "cpu.build.log").write_text("the build's log\n")
        (images / ".cpu.lock").write_text("")
        if self.fail:
            raise CheckFailed("the image layer failed")
        (images / f"{name}.sif").write_bytes(b"the rebuilt image")
        return images / f"{name}.sif"


@pytest.fixture
def compared(monkeypatch):
    """rebuild_check.check: records what it compared, says the same files (or differs)."""
    calls = []

    def check(apptainer, published, rebuilt):
        assert rebuilt.read_bytes() == b"the rebuilt image"
        calls.append((published, rebuilt))
        if os.environ.get("TEST_REBUILD_DIFFERS"):
            raise CheckFailed(f"{rebuilt}: 3 of its files differ from the published image's")
        print(f"{rebuilt}: the rebuild holds the same 7 files as the published image")

    monkeypatch.setattr(rebuild_check, "check", check)
    return calls


def test_rebuild_takes_the_bundle_kept_whole_and_removes_its_images_folder(site, read_back, monkeypatch, compared):
    assert publish(site, "--bundle", site[4], "--with-bundle").returncode == 0
    build = FakeBuild(monkeypatch)
    result = rebuild(site)
    assert result.returncode == 0, result.stderr
    root = (site[2] / "pytorch" / "1.0").resolve()
    (call,) = build.calls
    assert (call["target"], call["force"], call["bundle"]) == ("cpu", "all", root / "bundle")
    # a fresh folder under images/ where the command runs
    assert call["images"].parent == Path("images") and call["images"].name.startswith(".rebuild-pytorch-1.0-")
    assert compared == [(root / "image.sif", call["images"] / "cpu.sif")]
    assert result.stdout.splitlines() == [
        f"rebuilding pytorch/1.0 (cpu) from the bundle {root / 'bundle'} into {call['images']}",
        f"{call['images'] / 'cpu.sif'}: the rebuild holds the same 7 files as the published image",
    ]
    assert list((site[3] / "images").iterdir()) == []  # removed at the end


def test_rebuild_takes_a_named_bundle_whose_manifest_is_the_kept_one(site, read_back, monkeypatch, compared):
    assert publish(site, "--bundle", site[4]).returncode == 0
    copy = shutil.copytree(site[4], site[0] / "elsewhere")  # the same bundle, moved
    build = FakeBuild(monkeypatch)
    result = rebuild(site, "--bundle", copy, "--images", site[0] / "rebuilt")
    assert result.returncode == 0, result.stderr
    assert build.calls[0]["bundle"] == copy
    assert (site[0] / "rebuilt" / "cpu.sif").is_file()  # --images: kept


def test_rebuild_refuses_a_bundle_of_another_manifest_in_one_line(site, read_back, monkeypatch, compared):
    assert publish(site, "--bundle", site[4]).returncode == 0
    other = write_bundle(site[0] / "other", {**cpu_files(), "python/extra-1.0-py3-none-any.whl": b"x"})
    build = FakeBuild(monkeypatch)
    result = rebuild(site, "--bundle", other)
    root = (site[2] / "pytorch" / "1.0").resolve()
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: command line: --bundle {other}: its SHA256SUMS (sha256 {sha256(other / 'SHA256SUMS')}) is not "
        f"the one pytorch/1.0 was published with ({root / 'bundle.SHA256SUMS'}, sha256 "
        f"{sha256(site[4] / 'SHA256SUMS')}); name that bundle"
    ]
    assert build.calls == [] and not (site[3] / "images").exists()


def test_rebuild_needs_a_bundle_named_where_only_the_manifest_is_kept(site, read_back, monkeypatch, compared):
    assert publish(site, "--bundle", site[4]).returncode == 0
    result = rebuild(site)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: command line: pytorch/1.0 keeps only its bundle's manifest (bundle.SHA256SUMS, sha256 "
        f"{sha256(site[4] / 'SHA256SUMS')}); name the bundle with --bundle DIR"
    ]


def test_rebuild_of_a_version_published_without_a_bundle_is_refused(site, monkeypatch, compared):
    assert publish(site).returncode == 0
    result = rebuild(site, "--bundle", site[4])
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert "pytorch/1.0 was published without its source bundle (no bundle.SHA256SUMS)" in result.stderr


def test_a_rebuild_that_differs_fails_and_a_failed_build_keeps_only_its_logs(site, read_back, monkeypatch, compared):
    assert publish(site, "--bundle", site[4], "--with-bundle").returncode == 0
    FakeBuild(monkeypatch)
    monkeypatch.setenv("TEST_REBUILD_DIFFERS", "1")
    result = rebuild(site)
    assert result.returncode == 1 and "3 of its files differ from the published image's" in result.stderr
    assert list((site[3] / "images").iterdir()) == []
    monkeypatch.delenv("TEST_REBUILD_DIFFERS")
    FakeBuild(monkeypatch, fail=True)
    result = rebuild(site)
    assert result.returncode == 1 and "the image layer failed" in result.stderr
    (left,) = (site[3] / "images").iterdir()
    assert [path.name for path in left.iterdir()] == ["cpu.build.log"]
    note = f"note: the rebuild's build logs are kept in images/{left.name}; remove it once read"
    assert result.stdout.splitlines()[-1] == note
