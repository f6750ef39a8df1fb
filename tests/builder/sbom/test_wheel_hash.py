"""The DeepSpeed wheel an image builds has its sha256 in the SBOM: the block's line records it
in the venv (run here in sh on a stand-in wheel), the SBOM reads that record from the image's
unpacked root file system (a fake root in tmp_path) and puts it on DeepSpeed's component."""

import dataclasses
import hashlib
import json
import subprocess

from conftest import recipe_tree
from helpers.fake_runner import FakeRunner

from builder import sbom
from builder.render.blocks import deepspeed
from builder.sbom import document, inventory, rootfs

TREE = recipe_tree()
WHEEL = "deepspeed-0.19.8-cp311-cp311-linux_x86_64.whl"
BYTES = b"a wheel compiled in the image"
SHA256 = hashlib.sha256(BYTES).hexdigest()
CONTENTS = inventory.Inventory(
    os={"ID": "debian", "VERSION_ID": "13"},
    debs=(("bash", "5.2.37-2+b5", "amd64"),),
    dists=(("deepspeed", "0.19.8"), ("torch", "2.13.0+cpu")),
    ops=("cpu_adam_op",),
)


def recorded_root(tmp_path, venv="/opt/venv"):
    """A root file system whose venv holds the record, written by the block's own line."""
    root = tmp_path / "root"
    (tmp_path / "ds" / "wheel").mkdir(parents=True)
    (tmp_path / "ds" / "wheel" / WHEEL).write_bytes(BYTES)
    build = next(part for part in deepspeed.parts(TREE.target("cpu")) if part.stage == "build")
    (line,) = [line for line in build.post if deepspeed.WHEEL_RECORD in line]
    script = f"ds_tmp={tmp_path / 'ds'}\n" + line.replace(venv, f"{root}{venv}")
    done = subprocess.run(["sh", "-e", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return root


def deepspeed_component(text):
    return next(c for c in json.loads(text)["components"] if c["name"] == "deepspeed")


def test_the_record_names_the_installed_wheel_and_its_sha256(tmp_path):
    root = recorded_root(tmp_path)
    record = rootfs.file_text(root, sbom.wheel_record("/opt/venv"))
    assert record == f"{SHA256}  {WHEEL}\n"  # sha256sum's line: the same bytes for the same wheel
    assert inventory.built_wheels(record) == (("deepspeed", "0.19.8", SHA256),)


def test_the_deepspeed_component_carries_the_wheels_sha256(tmp_path):
    record = rootfs.file_text(recorded_root(tmp_path), sbom.wheel_record("/opt/venv"))
    contents = dataclasses.replace(CONTENTS, wheels=inventory.built_wheels(record))
    text = document.render(TREE.target("cpu"), "k1", {}, contents)
    assert deepspeed_component(text)["hashes"] == [{"alg": "SHA-256", "content": SHA256}]
    torch = next(c for c in json.loads(text)["components"] if c["name"] == "torch")
    assert "hashes" not in torch  # from the lock's wheels: the lock holds those hashes
    # an image built before the record, or a record of another version: no hash, no error
    assert "hashes" not in deepspeed_component(document.render(TREE.target("cpu"), "k1", {}, CONTENTS))
    other = dataclasses.replace(CONTENTS, wheels=(("deepspeed", "0.19.7", SHA256),))
    assert "hashes" not in deepspeed_component(document.render(TREE.target("cpu"), "k1", {}, other))


def test_a_record_of_another_shape_names_no_wheel():
    assert inventory.built_wheels(None) == ()
    assert inventory.built_wheels(f"{SHA256}  deepspeed.tar.gz\nnot a line\n{SHA256[:-1]}  {WHEEL}\n") == ()
    assert inventory.built_wheels(f"{SHA256} *{WHEEL}\n") == (("deepspeed", "0.19.8", SHA256),)


def test_a_link_out_of_the_root_is_not_followed_to_the_hosts_file(tmp_path):
    root = tmp_path / "root"
    (root / "opt").mkdir(parents=True)
    outside = tmp_path / "host-venv"
    (outside / "share" / "hpc-ml-runtime").mkdir(parents=True)
    (outside / "share" / "hpc-ml-runtime" / deepspeed.WHEEL_RECORD).write_text(f"{SHA256}  {WHEEL}\n")
    (root / "opt" / "venv").symlink_to(outside)  # absolute: in the image it names the image's own
    assert rootfs.file_text(root, sbom.wheel_record("/opt/venv")) is None
    assert rootfs.file_text(root, "/no/such/file") is None


def test_ensure_reads_the_record_from_the_unpacked_image(monkeypatch, tmp_path):
    FakeRunner(monkeypatch)
    root = recorded_root(tmp_path)

    def unpack(apptainer, image, into):  # the fake image's files, as unsquashfs leaves them
        subprocess.run(["cp", "-a", str(root), str(into)], check=True)
        return into

    monkeypatch.setattr(rootfs, "unpack", unpack)
    monkeypatch.setattr(inventory, "read", lambda *args: CONTENTS)
    image = tmp_path / "cpu.sif"
    image.write_text("an image")
    unlocked = dataclasses.replace(TREE.target("cpu"), python_lock=None, debian_locks=())
    made = sbom.ensure(unlocked, image, "key-1", apptainer="apptainer")
    assert deepspeed_component(made.read_text())["hashes"] == [{"alg": "SHA-256", "content": SHA256}]
    assert not list(tmp_path.glob(".hpcml-rootfs-*"))  # the unpacked root is removed
