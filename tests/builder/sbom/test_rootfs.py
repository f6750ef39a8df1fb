"""builder/sbom/rootfs.py: the canonical listing of a root file system, its digest, and the
paths two listings disagree on; and `verify --rebuild`'s comparison on real (tiny) SIFs."""

import hashlib
import os
import shutil
import subprocess

import pytest

from builder.errors import CheckFailed
from builder.fileio import sha256_file
from builder.layerbuild import packing
from builder.publish import rebuild_check
from builder.sbom import rootfs

TOOL = b"#!/bin/sh\necho hi\n"


def _tree(root):
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/tool").write_bytes(TOOL)
    (root / "usr/bin/tool").chmod(0o755)
    (root / "usr/bin/alias").symlink_to("tool")
    (root / ".singularity.d").mkdir()
    (root / ".singularity.d/labels.json").write_text("{}")
    (root / ".singularity.d/labels.json").chmod(0o644)
    (root / ".singularity.d").chmod(0o755)
    return root


def test_a_listing_names_each_path_its_kind_mode_and_contents(tmp_path):
    lines = rootfs.listing(_tree(tmp_path / "a"))
    assert lines == [
        "/.singularity.d\tdir\t0755\t-",
        f"/.singularity.d/labels.json\tfile\t0644\t{hashlib.sha256(b'{}').hexdigest()}",
        "/usr\tdir\t0755\t-",
        "/usr/bin\tdir\t0755\t-",
        "/usr/bin/alias\tlink\t0777\ttool",
        f"/usr/bin/tool\tfile\t0755\t{hashlib.sha256(TOOL).hexdigest()}",
    ]


def test_two_trees_with_the_same_files_have_one_digest_whatever_their_times(tmp_path):
    a, b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    os.utime(b / "usr/bin/tool", (0, 0))
    assert rootfs.digest(rootfs.listing(a)) == rootfs.digest(rootfs.listing(b))
    assert rootfs.differing(rootfs.listing(a), rootfs.listing(b)) == []


@pytest.mark.parametrize(
    "change",
    [
        lambda b: (b / "usr/bin/tool").write_text("#!/bin/sh\necho ho\n"),
        lambda b: (b / "usr/bin/tool").chmod(0o700),
        lambda b: ((b / "usr/bin/alias").unlink(), (b / "usr/bin/alias").symlink_to("other")),
        lambda b: (b / ".singularity.d/labels.json").write_text('{"build-date": "tomorrow"}'),
    ],
    ids=["contents", "mode", "link target", "apptainer's own"],
)
def test_a_file_written_otherwise_is_named(tmp_path, change):
    a, b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    change(b)
    (b / "usr/lib").mkdir()  # and one only the second holds
    differ = rootfs.differing(rootfs.listing(a), rootfs.listing(b))
    assert differ in [
        [changed, "/usr/lib"] for changed in ("/usr/bin/tool", "/usr/bin/alias", "/.singularity.d/labels.json")
    ]
    assert rootfs.digest(rootfs.listing(a)) != rootfs.digest(rootfs.listing(b))


def _sif(apptainer, root, image, compressed=True):
    """``root`` packed as every build route packs a layer."""
    (root / "bin").mkdir()
    shutil.copy("/bin/dash", root / "bin" / "sh")
    how = packing.Packing(
        apptainer,
        definition="Bootstrap: scratch\n",
        host_values={},
        compressed=compressed,
        log=image.with_suffix(".log"),
    )
    work = image.with_suffix(".work")
    work.mkdir()
    packing.pack(how, root, image, work)
    return image


def test_verify_rebuild_compares_two_real_images_by_sha256_then_objects_then_files(apptainer, tmp_path, capsys):
    one = _sif(apptainer, _tree(tmp_path / "one"), tmp_path / "one.sif")
    again = _sif(apptainer, _tree(tmp_path / "again"), tmp_path / "again.sif")
    rebuild_check.check(apptainer, one, again)
    assert f"again.sif: the same bytes as the published image (sha256 {sha256_file(one)})" in capsys.readouterr().out
    signed = tmp_path / "signed.sif"  # the published copy carries a signature object the rebuild lacks
    shutil.copy(one, signed)
    (tmp_path / "sig").write_text("-----BEGIN PGP SIGNED MESSAGE-----\n")
    add = ["sif", "add", "--datatype", "5", "--signhash", "1", "--signentity", "0" * 40, "--link", "1"]
    assert subprocess.run([apptainer, *add, str(signed), str(tmp_path / "sig")], timeout=60).returncode == 0
    rebuild_check.check(apptainer, signed, again)
    assert "the same definition, metadata and root file system as the published image" in capsys.readouterr().out
    changed = _tree(tmp_path / "changed")
    (changed / "usr/bin/tool").write_text("#!/bin/sh\necho changed\n")
    other = _sif(apptainer, changed, tmp_path / "changed.sif")
    with pytest.raises(CheckFailed, match="1 of its files differ"):
        rebuild_check.check(apptainer, one, other)
    assert "DIFFERS /usr/bin/tool" in capsys.readouterr().out
    # the same files packed another way (here uncompressed; another mksquashfs, or an image
    # packed before packing.py): not the same bytes, and said so
    otherwise = _sif(apptainer, _tree(tmp_path / "otherwise"), tmp_path / "otherwise.sif", compressed=False)
    with pytest.raises(CheckFailed, match="but not the same bytes: packed another way"):
        rebuild_check.check(apptainer, one, otherwise)
    assert not list(tmp_path.glob(".hpcml-rebuild-*"))  # the unpacked trees are gone
