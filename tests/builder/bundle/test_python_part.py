"""bundle.python_part: every file the Python lock names, found with the real uv in a wheel
folder of the test's own (helpers/pip_sources.py), fetched by its sha256; and the offline
check a build from a bundle starts with."""

import hashlib

import pytest
from helpers.pip_sources import serve, wheel

from builder import lockfile
from builder.bundle import fetched, python_part
from builder.errors import ToolError


@pytest.fixture
def sources(tmp_path, monkeypatch):
    yield from serve(tmp_path, monkeypatch)


def _lock(*paths):
    pins = []
    for path in paths:
        name, version = path.name.split("-")[:2]
        pins.append(lockfile.Pinned(name, version, (hashlib.sha256(path.read_bytes()).hexdigest(),), (path.name,)))
    step = lockfile.Step("extras", "alpha==1.0 beta==2.0", tuple(pins))
    return lockfile.PythonLock("mini", "3.11", "x86_64-manylinux_2_36", (step,), "locks/mini/python.txt")


def test_every_locked_file_is_found_and_fetched_by_its_sha256(sources, tmp_path):
    lock = _lock(wheel(sources, "alpha", "1.0"), wheel(sources, "beta", "2.0"))
    found = python_part.files(lock)
    assert sorted(found) == ["python/alpha-1.0-py3-none-any.whl", "python/beta-2.0-py3-none-any.whl"]
    for path, (url, sha256) in found.items():
        assert fetched.fetch(url, tmp_path / "bundle" / path, sha256) == "fetched"
    listed = {path: sha256 for path, (_url, sha256) in found.items()}
    python_part.check_against_lock(lock, listed)


def test_a_locked_file_no_source_serves_any_more_is_named(sources):
    lock = _lock(wheel(sources, "alpha", "1.0"))
    wheel(sources, "alpha", "1.0", ["beta"])  # the same name, other bytes
    with pytest.raises(ToolError, match=r"^alpha 1\.0: no pip source serves its file with sha256 [0-9a-f]{64}"):
        python_part.files(lock)


def test_the_build_refuses_a_bundle_without_a_pin_or_with_a_stranger(sources):
    alpha, beta = wheel(sources, "alpha", "1.0"), wheel(sources, "beta", "2.0")
    lock = _lock(alpha, beta)
    listed = {f"python/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest() for p in (alpha, beta)}
    python_part.check_against_lock(lock, listed)
    with pytest.raises(ToolError, match=r"^beta 2\.0: none of its locked files is in the bundle"):
        python_part.check_against_lock(lock, {k: v for k, v in listed.items() if "alpha" in k})
    with pytest.raises(ToolError, match=r"^python/gamma-3\.0\.whl: the bundle holds a file .* does not name"):
        python_part.check_against_lock(lock, {**listed, "python/gamma-3.0.whl": "1" * 64})
