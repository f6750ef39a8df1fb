"""bundle.manifest: SHA256SUMS as sha256sum writes it, and a check that reads every file back."""

import hashlib
import subprocess

import pytest

from builder.bundle import fetched, manifest
from builder.errors import ToolError


def _bundle(tmp_path):
    files = {}
    for path, data in {"python/a-1.0-py3-none-any.whl": b"wheel", "debian/pool/main/b/b_1_all.deb": b"deb"}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
        files[path] = hashlib.sha256(data).hexdigest()
    manifest.write(tmp_path, files)
    return files


def test_the_list_reads_back_and_sha256sum_checks_it(tmp_path):
    files = _bundle(tmp_path)
    assert manifest.read(tmp_path) == files == manifest.check(tmp_path)
    result = subprocess.run(["sha256sum", "--check", "--strict", manifest.NAME], cwd=tmp_path, capture_output=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_changed_file_is_refused_in_one_line_naming_it(tmp_path):
    _bundle(tmp_path)
    (tmp_path / "debian/pool/main/b/b_1_all.deb").write_bytes(b"tampered")
    with pytest.raises(ToolError) as error:
        manifest.check(tmp_path)
    message = str(error.value)
    assert "\n" not in message and "debian/pool/main/b/b_1_all.deb" in message and "bundle lists" in message


def test_a_missing_file_is_named(tmp_path):
    _bundle(tmp_path)
    (tmp_path / "python/a-1.0-py3-none-any.whl").unlink()
    with pytest.raises(ToolError, match=r"a-1\.0-py3-none-any\.whl: missing from the bundle"):
        manifest.check(tmp_path)


@pytest.mark.parametrize("line", ["0" * 64 + "  ../etc/passwd", "0" * 63 + "  x", "0" * 64 + " x", "0" * 64 + "  /abs"])
def test_a_list_line_outside_the_form_is_refused(tmp_path, line):
    (tmp_path / manifest.NAME).write_text(line + "\n")
    with pytest.raises(ToolError, match=rf"{manifest.NAME}:1: expected"):
        manifest.read(tmp_path)


def test_fetch_keeps_a_checked_file_and_refuses_other_bytes(tmp_path):
    source = tmp_path / "served.whl"
    source.write_bytes(b"right")
    right = hashlib.sha256(b"right").hexdigest()
    dest = tmp_path / "bundle" / "python" / "served.whl"
    assert fetched.fetch(source.as_uri(), dest, right) == "fetched"
    assert fetched.fetch(source.as_uri(), dest, right) == "kept"
    other = tmp_path / "bundle" / "python" / "other.whl"
    with pytest.raises(ToolError, match="expected " + "0" * 64):
        fetched.fetch(source.as_uri(), other, "0" * 64)
    assert not other.exists() and not list(other.parent.glob(".*.part"))
