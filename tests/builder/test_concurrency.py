"""Builds, smoke runs and publishes of one image started together: each either runs or stops
at once with one line saying who holds the image; none changes an image, a cached layer or a
module. Real processes of the CLI, the real CPU image; its layers come from the user's cache."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import ROOT, flocks, run_builder, tmpfs, wait_until
from helpers.child_signals import default_signals

from builder.host import cache

QUICK_SIZES = ("--sizes", "8:1M", "--warmup", "1", "--iters", "2")
LOCKED_MESSAGES = ("another build of it is running", "a smoke run or publish is reading it", "a build of it is running")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def state(*folders):
    """Every image file and cached layer under the folders, by content."""
    return {str(p): sha256(p) for folder in folders for p in sorted(Path(folder).rglob("*.sif"))}


def start(*args, env=None):
    return subprocess.Popen(
        [sys.executable, "-m", "builder", *map(str, args)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,  # a build is stopped with SIGINT, as Ctrl-C does
    )


def held(lock: Path) -> bool:
    """Someone holds the image's lock. Read from /proc/locks: a probe that took the lock
    itself, even for an instant, could make the command under test stop as if a build held it."""
    return lock.exists() and any(not mode.startswith("->") for mode in flocks(lock))


@pytest.fixture
def images(cpu_image, apptainer, tmp_path):
    """A fresh images folder with the CPU image, its layers linked from the user's cache."""
    folder = tmp_path / "images"
    result = run_builder("build", "cpu", "--images", folder, timeout=600)
    assert result.returncode == 0, result.stderr
    return folder


def test_two_builds_of_one_target_at_once(cpu_image, tmp_path):
    folder = tmp_path / "images"
    before = state(cache.slot("cpu", "image"))
    builds = [start("build", "cpu", "--images", folder) for _ in range(2)]
    results = [(p.wait(timeout=900), p.stderr.read()) for p in builds]
    for status, stderr in results:
        assert status == 0 or (
            status == 1 and "cpu: another build of it is running" in stderr and stderr.strip().count("\n") == 0
        ), stderr
    assert any(status == 0 for status, _ in results)
    # the image layer of the cache, whole (the session's image may have been rebuilt since)
    key = json.loads((folder / "cpu.sif.json").read_text())["key"]
    assert sha256(folder / "cpu.sif") == sha256(cache.slot("cpu", "image") / f"{key}.sif")
    assert state(cache.slot("cpu", "image")) == before
    assert not [p for p in folder.rglob("*") if "tmp" in p.name]


def test_a_build_stops_at_once_while_smoke_and_publish_read_the_image(images, apptainer, tmp_path):
    before = state(images, cache.slot("cpu", "image"))
    # the quick sizes: the smoke run only has to hold its reader's lock while the others try
    smoke = start("smoke", "cpu", "--images", images, "--", *QUICK_SIZES, env={"HPCML_APPTAINER": apptainer})
    try:
        taken = wait_until(lambda: held(images / ".cpu.lock") or smoke.poll() is not None, 120)
        assert taken and smoke.poll() is None, f"smoke never took the lock: {smoke.stderr.read() if taken else ''}"
        build = run_builder("build", "cpu", "--images", images, "--force", timeout=120)
        assert build.returncode == 1
        assert build.stderr.strip() == (
            f"error: cpu: a smoke run or publish is reading it (lock "
            f"{images / '.cpu.lock'}); try again when it has finished"
        )
        # readers share the image: a publish runs beside the smoke run
        prefix = tmp_path / "appl"
        prefix.mkdir()
        published = run_builder(
            "publish",
            "cpu",
            "--images",
            images,
            "--prefix",
            prefix,
            "--version",
            "1.0",
            "--skip-smoke",
            env={"HPCML_APPTAINER": apptainer},
            timeout=600,
        )
        assert published.returncode == 0, published.stderr
    finally:
        smoke.wait(timeout=900)
    assert smoke.returncode == 0, smoke.stderr.read()[-2000:]
    assert state(images, cache.slot("cpu", "image")) == before
    assert sha256(prefix / "pytorch" / "1.0" / "image.sif") == sha256(images / "cpu.sif")
    assert run_builder("verify", "--prefix", prefix, "pytorch/1.0").returncode == 0


def test_smoke_and_publish_stop_at_once_while_a_build_replaces_the_image(images, apptainer, tmp_path):
    before = state(images, cache.slot("cpu", "image"))
    build = start("build", "cpu", "--images", images, "--force")
    log = images / "cpu.image.build.log"
    (tmp_path / "appl").mkdir()
    try:
        assert wait_until(lambda: log.exists() and held(images / ".cpu.lock"), 120)
        expected = f"error: cpu: a build of it is running (lock {images / '.cpu.lock'}); try again when it has finished"
        smoke = run_builder("smoke", "cpu", "--images", images, env={"HPCML_APPTAINER": apptainer})
        publish = run_builder(
            "publish",
            "cpu",
            "--images",
            images,
            "--prefix",
            tmp_path / "appl",
            "--skip-smoke",
            env={"HPCML_APPTAINER": apptainer},
        )
        for result in (smoke, publish):
            assert result.returncode == 1 and result.stderr.strip() == expected, result.stderr
        assert not (tmp_path / "appl" / "pytorch").exists()
    finally:
        build.send_signal(signal.SIGINT)  # Ctrl-C: the build stops and cleans up
        build.wait(timeout=120)
    assert wait_until(lambda: not [p for p in images.rglob("*") if "tmp" in p.name], 60)
    assert state(images, cache.slot("cpu", "image")) == before


def test_the_layer_cache_survives_a_concurrent_prune(tmp_path, monkeypatch):
    """Threads store new keys (each store prunes the slot to its newest two) while others
    fetch keys that the prune removes under them: a fetch finds its layer or says none."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    layer = tmp_path / "layer.sif"
    layer.write_bytes(os.urandom(1 << 16))
    errors, fetched = [], []

    def storing(worker):
        try:
            for number in range(150):
                cache.store("t", "image", f"{worker}-{number}", layer)
        except Exception as error:  # noqa: BLE001 -- any failure fails the test
            errors.append(repr(error))

    def fetching(worker):
        try:
            for number in range(150):
                dest = tmp_path / f"out-{worker}.sif"
                if cache.fetch("t", "image", f"{number % 2}-{number}", dest):
                    fetched.append(dest.read_bytes() == layer.read_bytes())
        except Exception as error:  # noqa: BLE001
            errors.append(repr(error))

    threads = [threading.Thread(target=storing, args=(w,)) for w in range(2)]
    threads += [threading.Thread(target=fetching, args=(w,)) for w in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert all(fetched)
    assert len(list(cache.slot("t", "image").glob("*.sif"))) <= cache.KEEP_PER_LAYER + 2
    assert not list(cache.slot("t", "image").glob(".*tmp*"))


@pytest.mark.parametrize("lock_file", [True, False], ids=["lock-file", "no-lock-file"])
def test_smoke_and_publish_read_an_image_in_a_read_only_folder(tmp_path, lock_file):
    """An admin publishing from a build folder they cannot write: the shared lock is taken
    on the lock file that is there (flock needs no write access), or none where none is."""
    from builder.host.images import image_lock

    with tmpfs(tmp_path / "images", "size=1m") as folder:
        if lock_file:
            (folder / ".cpu.lock").touch()
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        with image_lock(folder, "cpu", shared=True):
            assert held(folder / ".cpu.lock") == lock_file
