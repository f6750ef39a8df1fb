"""builder/sbom/rootfs.py: the canonical listing of a root file system, its digest, and the
paths two listings disagree on; and `verify --rebuild`'s comparison on real (tiny) SIFs."""

import hashlib
import os
import subprocess

import pytest

from builder.errors import CheckFailed
from builder.host import build_route
from builder.publish import rebuild_check
from builder.sbom import rootfs

TOOL = b"#!/bin/sh\necho hi\n"


def _tree(root):
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/tool").write_bytes(TOOL)
    (root / "usr/bin/tool").chmod(0o755)
    (root / "usr/bin/alias").symlink_to("tool")
    (root / ".singularity.d").mkdir()
    (root / ".singularity.d/labels.json").write_text('{"org.label-schema.build-date": "today"}')
    return root


def test_a_listing_names_each_path_its_kind_mode_and_contents(tmp_path):
    lines = rootfs.listing(_tree(tmp_path / "a"))
    assert lines == [
        "/usr\tdir\t0755\t-",
        "/usr/bin\tdir\t0755\t-",
        "/usr/bin/alias\tlink\t0777\ttool",
        f"/usr/bin/tool\tfile\t0755\t{hashlib.sha256(TOOL).hexdigest()}",
    ]


def test_two_trees_with_the_same_files_have_one_digest_whatever_their_times(tmp_path):
    a, b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    os.utime(b / "usr/bin/tool", (0, 0))
    (b / ".singularity.d/labels.json").write_text('{"org.label-schema.build-date": "tomorrow"}')  # declared
    assert rootfs.digest(rootfs.listing(a)) == rootfs.digest(rootfs.listing(b))
    assert rootfs.differing(rootfs.listing(a), rootfs.listing(b)) == []


@pytest.mark.parametrize(
    "change",
    [
        lambda b: (b / "usr/bin/tool").write_text("#!/bin/sh\necho ho\n"),
        lambda b: (b / "usr/bin/tool").chmod(0o700),
        lambda b: ((b / "usr/bin/alias").unlink(), (b / "usr/bin/alias").symlink_to("other")),
    ],
    ids=["contents", "mode", "link target"],
)
def test_a_file_written_otherwise_is_named(tmp_path, change):
    a, b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    change(b)
    (b / "usr/lib").mkdir()  # and one only the second holds
    differ = rootfs.differing(rootfs.listing(a), rootfs.listing(b))
    assert differ in (["/usr/bin/tool", "/usr/lib"], ["/usr/bin/alias", "/usr/lib"])
    assert rootfs.digest(rootfs.listing(a)) != rootfs.digest(rootfs.listing(b))


def _sif(apptainer, root, image):
    built = subprocess.run([apptainer, "build", str(image), str(root)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    return image


def test_verify_rebuild_compares_two_real_images_by_their_files(apptainer, tmp_path, capsys):
    one = _sif(apptainer, _tree(tmp_path / "one"), tmp_path / "one.sif")
    again = _sif(apptainer, _tree(tmp_path / "again"), tmp_path / "again.sif")
    assert one.read_bytes() != again.read_bytes()  # the SIF header's time and UUID differ
    rebuild_check.check(apptainer, one, again)
    assert "the rebuild holds the same" in capsys.readouterr().out
    changed = _tree(tmp_path / "changed")
    (changed / "usr/bin/tool").write_text("#!/bin/sh\necho changed\n")
    other = _sif(apptainer, changed, tmp_path / "changed.sif")
    with pytest.raises(CheckFailed, match="1 of its files differ"):
        rebuild_check.check(apptainer, one, other)
    assert "DIFFERS /usr/bin/tool" in capsys.readouterr().out
    assert not list(tmp_path.glob(".hpcml-rebuild-*"))  # the unpacked trees are gone


@pytest.mark.parametrize(
    ("uid", "userns", "setuid", "way"),
    [(0, False, False, "apptainer"), (1000, True, False, "apptainer"), (1000, False, True, "apptainer")]
    + [(1000, False, False, "unsquashfs")],
)
def test_an_image_is_unpacked_by_unsquashfs_where_apptainer_cannot(tmp_path, monkeypatch, uid, userns, setuid, way):
    """LUMI's login node (no root, no user namespace, no setuid starter): `build --sandbox`
    fails there, so verify --rebuild's listing unpacks with unsquashfs instead."""
    asked = []
    monkeypatch.setattr(build_route.os, "geteuid", lambda: uid)
    monkeypatch.setattr(build_route, "_can_unshare", lambda: userns)
    monkeypatch.setattr(build_route, "_setuid_starter", lambda runtime: setuid)
    monkeypatch.setattr(rootfs.sif, "root_partition", lambda apptainer, image: ("partition", image))
    monkeypatch.setattr(rootfs.sif, "unpack", lambda partition, into, log: asked.append("unsquashfs"))
    monkeypatch.setattr(rootfs.runner, "run", lambda argv, **options: asked.append(argv[0]))
    rootfs.unpack("apptainer", tmp_path / "x.sif", tmp_path / "root")
    assert asked == [way]
