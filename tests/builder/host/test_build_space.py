"""A build into a disk that is too small: refused up front with the numbers when the estimate
does not fit, and, when a disk fills part way, one line naming the folder, the previous image
as it was and no temporary files left. The small disks are real tmpfs mounts (root)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import RECIPES, ROOT, run_builder, tmpfs
from helpers.layer_build import BUILD_ONE_LAYER

from builder.host import space

PREVIOUS = b"the previous image\n"


def leftovers(*folders):
    """Temporary files of a build: its work folders, half-written layer files, copies."""
    found = []
    for folder in folders:
        found += [
            str(p)
            for p in Path(folder).rglob("*")
            if "tmp" in p.name or p.name.startswith(("hpcml-build-", "build-temp-", "rootfs-"))
        ]
    return found


def one_line(stderr):
    """The error: one line, after the progress lines ("[  1.0s] ...") of what did start."""
    lines = [line for line in stderr.strip().splitlines() if not line.startswith("[")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_a_build_that_cannot_fit_is_refused_before_it_starts(cpu_image, tmp_path):
    with tmpfs(tmp_path / "small", "size=64m") as images:
        (images / "cpu.sif").write_bytes(PREVIOUS)
        result = run_builder("build", "cpu", "--images", images, timeout=300)
        line = one_line(result.stderr)
        assert result.returncode == 1
        assert line.startswith("error: not enough disk space to build cpu: the images folder")
        assert re.search(rf"\({re.escape(str(images))}\) need [0-9.]+ GB, 0\.0[67] GB free there", line)
        assert "--no-space-check" in line
        # the estimate: at least the image file and the unpacked tree of the layer below it
        needed = float(line.split(" need ")[1].split(" GB")[0])
        assert needed > 0.43 + 1.1
        assert (images / "cpu.sif").read_bytes() == PREVIOUS
        assert leftovers(images) == [] and not list(images.glob("*.build.log"))  # none started


def test_apptainers_temporary_folder_is_chosen_and_checked_on_its_own(cpu_image, tmp_path):
    """APPTAINER_TMPDIR on a small disk: the check names it, not the roomy images folder."""
    with tmpfs(tmp_path / "small-tmp", "size=32m") as small:
        result = run_builder(
            "build",
            "cpu",
            "--images",
            tmp_path / "images",
            "--force",
            env={"APPTAINER_TMPDIR": str(small)},
            timeout=300,
        )
        line = one_line(result.stderr)
        assert result.returncode == 1
        assert f"the build's temporary folder ({small}) needs " in line
        assert "the images folder" not in line
        assert not (tmp_path / "images" / "cpu.sif").exists()


def test_a_layer_copied_from_the_cache_into_a_full_disk_names_the_folder(cpu_image, tmp_path):
    """The check set aside: the cache's layers are copied (another file system) until the
    disk is full; one line names the images folder, and no half copy is left."""
    with tmpfs(tmp_path / "small", "size=300m") as images:
        (images / "cpu.sif").write_bytes(PREVIOUS)
        result = run_builder(
            "build",
            "cpu",
            "--images",
            images,
            "--no-space-check",
            env={"APPTAINER_TMPDIR": str(tmp_path / "tmp")},
            timeout=600,
        )
        line = one_line(result.stderr)
        assert result.returncode == 1
        assert line.startswith(f"error: ran out of disk space in the images folder ({images}, ")
        assert line.endswith("; the previous image is unchanged")
        assert (images / "cpu.sif").read_bytes() == PREVIOUS
        assert leftovers(images, tmp_path / "tmp") == []


def build_one_layer(tmp_path, post, images, tmp, base=None):
    """One layer on the CPU image's base layer (or base), as `build` runs each (test_build's script)."""
    definition = tmp_path / "x.def"
    definition.write_text(f"Bootstrap: localimage\nFrom: {{{{ BASE }}}}\n\n%post\n{post}\n")
    previous = images / "x.sif"
    previous.write_bytes(PREVIOUS)
    env = dict(os.environ, APPTAINER_TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            BUILD_ONE_LAYER,
            definition,
            previous,
            RECIPES,
            base or Path(images_of_cpu) / "cpu.base.sif",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    return result, previous


images_of_cpu = None


@pytest.fixture(autouse=True)
def _cpu_images(cpu_image):
    global images_of_cpu
    images_of_cpu = cpu_image.parent


def test_apptainer_filling_its_temporary_folder_is_named(tmp_path):
    """Apptainer unpacks the base layer's tree (about 1.1 GB) into a 200 MB temporary folder."""
    images = tmp_path / "images"
    images.mkdir()
    with tmpfs(tmp_path / "small-tmp", "size=200m") as small:
        result, previous = build_one_layer(tmp_path, "true", images, small)
        assert result.returncode == 1, result.stderr
        line = one_line(result.stderr)
        assert line.startswith(f"apptainer build ran out of disk space in the build's temporary folder ({small}, ")
        assert "the previous image, if any, is unchanged" in line and "x.build.log" in line
        assert previous.read_bytes() == PREVIOUS
        assert leftovers(images, small) == [] and list(small.iterdir()) == []


def test_the_image_file_filling_the_images_folder_is_named(tmp_path, tiny_image):
    """The tree fits in the temporary folder; the layer file (with 120 MB of random data,
    which no compression shrinks) does not fit in a 100 MB images folder. On the 1 MB busybox
    base: the CPU image's base made this a two-minute test."""
    with tmpfs(tmp_path / "small", "size=100m") as images:
        result, previous = build_one_layer(
            tmp_path, "head -c 120000000 /dev/urandom > /random.bin", images, tmp_path / "tmp", base=tiny_image
        )
        assert result.returncode == 1, result.stderr
        line = one_line(result.stderr)
        # Apptainer writes the layer in the temporary folder; packing it into the images folder fills that
        assert line.startswith(f"packing the layer ran out of disk space in the images folder ({images}, ")
        assert previous.read_bytes() == PREVIOUS
        assert leftovers(images, tmp_path / "tmp") == []


def test_the_estimate_counts_folders_on_one_disk_together(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    where = space.Folders(
        images=tmp_path / "images", tmp=tmp_path / "images" / ".tmp", apptainer_cache=tmp_path / "cache"
    )
    plan = {"devel": "current", "base": "build", "image": "build"}
    sizes = {"devel": 5e9, "base": 2e9, "image": 1e9}
    needed = space.needs(plan, sizes, where)
    # one file system: both layer files, and the larger unpacked tree (the image's: 1.3 x base)
    assert list(needed) == [where.images]
    amount, folders = needed[where.images]
    assert amount == pytest.approx(2e9 + 1e9 + space.UNPACKED_IMAGE * 2e9)
    assert where.tmp in folders
