"""builder/host/sif_header.py on real SIFs that `apptainer sif` assembles (no namespace
needed): the header and descriptors stamped with fixed times and a content-made ID, and a
digest of the data objects that a signature does not change."""

import subprocess

import pytest

from builder.errors import ToolError
from builder.host import sif_header

WHEN = 1767225600  # 2026-01-01T00:00:00Z


def _sif(apptainer, folder, text):
    folder.mkdir()
    (folder / "Singularity").write_text(text)
    (folder / "data.bin").write_bytes(b"\0" * 5000)
    image = folder / "made.sif"
    for argv in (
        ["sif", "new", image],
        ["sif", "add", "--datatype", "1", "--groupid", "1", image, folder / "Singularity"],
        [
            "sif",
            "add",
            "--datatype",
            "4",
            "--parttype",
            "2",
            "--partfs",
            "1",
            "--partarch",
            "2",
            image,
            folder / "data.bin",
        ],
    ):
        done = subprocess.run([apptainer, *map(str, argv)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    return image


def _header(apptainer, image):
    return subprocess.run([apptainer, "sif", "header", str(image)], capture_output=True, text=True, timeout=60).stdout


def test_two_packings_of_the_same_objects_are_one_file_once_stamped(apptainer, tmp_path):
    one = _sif(apptainer, tmp_path / "one", "Bootstrap: scratch\n")
    two = _sif(apptainer, tmp_path / "two", "Bootstrap: scratch\n")
    assert one.read_bytes() != two.read_bytes()  # a random ID, the day's times
    for image in (one, two):
        sif_header.stamp(image, WHEN)
    assert one.read_bytes() == two.read_bytes()
    header = _header(apptainer, one)
    assert "Created At:           2026-01-01 00:00:00 +0000 UTC" in header
    assert "Modified At:          2026-01-01 00:00:00 +0000 UTC" in header
    info = subprocess.run([apptainer, "sif", "info", "1", str(one)], capture_output=True, text=True, timeout=60).stdout
    assert "2026-01-01 00:00:00" in info
    # the ID comes from the objects: another definition, another ID
    other = _sif(apptainer, tmp_path / "other", "Bootstrap: scratch\n# changed\n")
    sif_header.stamp(other, WHEN)
    ids = {image.read_bytes()[48:64] for image in (one, other)}
    assert len(ids) == 2
    (found,) = [line for line in header.splitlines() if line.startswith("ID:")]
    assert found.split()[1][14] == "5"  # a version-5 form


def test_a_signature_object_leaves_the_objects_digest_as_it_was(apptainer, tmp_path):
    image = _sif(apptainer, tmp_path / "image", "Bootstrap: scratch\n")
    before = sif_header.objects_digest(image)
    assert [o.datatype for o in sif_header.objects(image)] == [0x4001, 0x4004]
    (tmp_path / "sig").write_text("-----BEGIN PGP SIGNED MESSAGE-----\n")
    added = subprocess.run(
        [apptainer, "sif", "add", "--datatype", "5", "--signhash", "1", "--signentity", "0" * 40,
         "--link", "1", str(image), str(tmp_path / "sig")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert [o.datatype for o in sif_header.objects(image)][-1] == sif_header.SIGNATURE
    assert sif_header.objects_digest(image) == before
    with open(image, "r+b") as sif:  # one byte of the definition changed: another digest
        sif.seek(sif_header.objects(image)[0].offset)
        sif.write(b"b")
    assert sif_header.objects_digest(image) != before


def test_a_file_that_is_no_sif_is_one_line(tmp_path):
    other = tmp_path / "image.sif"
    other.write_bytes(b"#!/bin/sh\n" + b"\0" * 200)
    with pytest.raises(ToolError, match=r"image.sif: not a SIF file \(no SIF_MAGIC in its header\)"):
        sif_header.objects(other)
