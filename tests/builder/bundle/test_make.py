"""bundle.make through the command line: a build from a bundle that is not one, that was
changed, or that was made for other locks stops in one line before anything is written. (A
real bundle made and built from: tests/images/test_bundle_rebuild.py.)"""

import hashlib

import pytest
from conftest import RECIPES, run_builder
from helpers import representative

from builder.bundle import manifest


def _bundle(folder, files: dict):
    for path, data in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    manifest.write(folder, {path: hashlib.sha256(data).hexdigest() for path, data in files.items()})
    return folder


def _build(tmp_path, bundle):
    result = run_builder("build", "cpu", "--images", tmp_path / "images", "--bundle", bundle)
    assert not (tmp_path / "images").exists()
    return result


def test_a_folder_that_is_no_bundle_is_a_usage_error(tmp_path):
    result = _build(tmp_path, tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: command line: {tmp_path}: no SHA256SUMS there, so not a bundle; make one with: "
        f"hpcml bundle cpu --out {tmp_path}"
    ]


# one check of every file, whichever part it is in: make unit tampers with one part's file
TAMPERED = {
    "debian": ("debian/pool/main/b/bash/bash_5.2.15-2+b13_amd64.deb",),
    "python": ("python/torch-2.13.0.whl",),
    "tools": ("tools/python/uv-0.13.9.whl",),
}


@pytest.mark.parametrize("path", representative.cases(TAMPERED, keep=["python"]))
def test_a_tampered_file_is_refused_in_one_line_naming_it(tmp_path, path):
    bundle = _bundle(tmp_path / "bundle", {path: b"as fetched"})
    (bundle / path).write_bytes(b"changed")
    result = _build(tmp_path, bundle)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bundle / path}: its sha256 is "), lines
    assert "the file was changed or damaged; nothing was built" in lines[0]


def test_a_bundle_of_other_locks_is_refused(tmp_path):
    debian = {
        f"locks/cpu/debian-{s}.txt": (RECIPES / f"locks/cpu/debian-{s}.txt").read_bytes() for s in ("build", "final")
    }
    bundle = _bundle(tmp_path / "bundle", {**debian, "locks/cpu/python.txt": b"# another lock\n"})
    result = _build(tmp_path, bundle)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {bundle}: made for another recipes/locks/cpu/python.txt than this checkout's; make it again "
        f"with: hpcml bundle cpu --out {bundle}"
    ]
