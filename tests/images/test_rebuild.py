"""Two cold builds of the CPU image from the same commit and lock, each in a cache of its own
(layers, kept DeepSpeed wheel), are the same files and the same SIF bytes, each layer too
(marker full: about 2 x 15 minutes on 2 cores; `make test-rebuild`). The figures are in
docs/performance.md."""

import shutil
import sys
import time

import pytest
from conftest import run_builder

from builder.fileio import sha256_file
from builder.host import cache
from builder.sbom import rootfs

pytestmark = pytest.mark.full


def _cold_build(tmp_path, name, apptainer):
    """A build with an empty cache of its own (the toolbox shared: it is no part of the image)."""
    home = tmp_path / f"cache-{name}"
    (home / "hpc-ml-containers").mkdir(parents=True)
    toolbox = cache.cache_dir() / "toolbox"
    if toolbox.is_dir():
        (home / "hpc-ml-containers" / "toolbox").symlink_to(toolbox)
    images = tmp_path / f"images-{name}"
    started = time.monotonic()
    result = run_builder("build", "cpu", "--images", images, env={"XDG_CACHE_HOME": str(home)}, timeout=5400)
    assert result.returncode == 0, result.stderr[-3000:]
    print(f"\ncold build {name}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    listing = rootfs.listing(rootfs.unpack(apptainer, images / "cpu.sif", tmp_path / f"root-{name}"))
    shutil.rmtree(tmp_path / f"root-{name}", ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    return listing, {layer: sha256_file(images / f"{layer}.sif") for layer in ("cpu.devel", "cpu.base", "cpu")}


def test_two_cold_builds_hold_the_same_files(apptainer, tmp_path):
    first, first_sums = _cold_build(tmp_path, "one", apptainer)
    second, second_sums = _cold_build(tmp_path, "two", apptainer)
    differ = rootfs.differing(first, second)
    print(f"\n{len(first)} paths; {len(differ)} differ: {differ[:20]}", file=sys.stderr)
    assert differ == [], differ[:20]
    assert rootfs.digest(first) == rootfs.digest(second)
    print(f"sha256: {first_sums} and {second_sums}", file=sys.stderr)
    assert first_sums == second_sums
