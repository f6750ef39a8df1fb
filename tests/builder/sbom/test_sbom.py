"""The SBOM's logic without an image: the CycloneDX document made from an inventory and
labels, when it is made again, and the probe that reads an image (the runtime's
smoke.contents, tested in tests/runtime/smoke/test_contents.py), run here on this Debian
host's own Python and dpkg. The SBOM of the real CPU image is in test_image_sbom.py."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, recipe_tree
from helpers.fake_runner import IMAGE_ANSWERS, FakeRunner

from builder import sbom
from builder.errors import ToolError
from builder.host import cache
from builder.sbom import document, inventory

TREE = recipe_tree()
IMAGE_ANSWER = IMAGE_ANSWERS[("exec",)]  # what the probe prints in a minimal image
RUNTIME = ROOT / "runtime"
LABELS = {
    "version.torch": "2.13.0",
    "nccl.version": "2.28.9",
    "cuda.runtime": "13.0",
    "cuda.min_driver": "580.65.06",
    "org.label-schema.build-date": "Friday_27_November_2026_4:59:33_UTC",
}
CONTENTS = inventory.Inventory(
    os={"ID": "debian", "VERSION_ID": "13"},
    debs=(("bash", "5.2.37-2+b5", "amd64"), ("libc6", "2.41-12", "amd64")),
    dists=(("deepspeed", "0.19.8"), ("mpi4py", "4.1.2"), ("torch", "2.13.0+cu130"), ("typing_extensions", "4.15.0")),
    ops=("cpu_adam_op", "fused_adam_op"),
)


def components(text):
    return {c["purl"]: c for c in json.loads(text)["components"]}


def test_the_document_lists_each_package_with_its_purl_and_is_valid_cyclonedx():
    text = document.render(TREE.target("h100-cuda"), "abc123", LABELS, CONTENTS)
    # imported here, not with the module: its jsonschema compiles rfc3987's grammars (2 s)
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    found = components(text)
    assert "pkg:deb/debian/bash@5.2.37-2%2Bb5?arch=amd64&distro=debian-13" in found
    assert found["pkg:pypi/torch@2.13.0%2Bcu130"]["version"] == "2.13.0+cu130"
    assert "pkg:pypi/typing-extensions@4.15.0" in found  # the purl's normal form of the name
    assert found["pkg:generic/nccl@2.28.9"]["name"] == "nccl"
    ops = [p["value"] for p in found["pkg:pypi/deepspeed@0.19.8"]["properties"] if p["name"] == "hpcml:deepspeed:op"]
    assert ops == ["cpu_adam_op", "fused_adam_op"]
    image = json.loads(text)["metadata"]["component"]
    facts = {p["name"]: p["value"] for p in image["properties"]}
    assert (image["type"], image["name"], image["version"]) == ("container", "h100-cuda", "2.13.0")
    assert facts["hpcml:layer-key"] == "abc123" and facts["hpcml:gpu-archs"] == "sm_90"
    assert facts["hpcml:cuda.min_driver"] == "580.65.06"


def test_the_same_image_gives_the_same_bytes_and_its_build_date():
    first = document.render(TREE.target("cpu"), "k1", LABELS, CONTENTS)
    assert first == document.render(TREE.target("cpu"), "k1", LABELS, CONTENTS)
    assert json.loads(first)["metadata"]["timestamp"] == "2026-11-27T04:59:33+00:00"
    other = document.render(TREE.target("cpu"), "k2", LABELS, CONTENTS)
    assert json.loads(other)["serialNumber"] != json.loads(first)["serialNumber"]


@pytest.mark.parametrize("value", ["", "yesterday", "Friday_31_February_2026_4:59:33_UTC"])
def test_an_unreadable_build_date_leaves_the_timestamp_out(value):
    assert document.build_date(value) is None


def test_ensure_makes_the_sbom_once_per_image_key(monkeypatch, tmp_path):
    fake = FakeRunner(monkeypatch)
    image = tmp_path / "cpu.sif"
    image.write_text("an image")
    unlocked = dataclasses.replace(TREE.target("cpu"), python_lock=None, debian_locks=())  # the fake holds none
    made = sbom.ensure(unlocked, image, "key-1", apptainer="apptainer")
    assert made == tmp_path / "cpu.sbom.json" and sbom.recorded_key(made) == "key-1"
    assert [c[1] for c in fake.commands] == ["inspect", "exec", "sif", "-offset"]
    assert fake.commands[1][3:] == ["/opt/venv/bin/python", "-I", "-m", "smoke.contents"]  # the image's own venv
    assert fake.commands[3][:3] == ["unsquashfs", "-offset", "86016"]  # unpacked for its files' digest
    assert not list(tmp_path.glob(".hpcml-rootfs-*"))  # and removed
    fake.commands.clear()
    sbom.ensure(unlocked, image, "key-1", apptainer="apptainer")
    assert fake.commands == []  # made for this image already
    sbom.ensure(unlocked, image, "key-2", apptainer="apptainer")
    assert sbom.recorded_key(made) == "key-2"


def test_an_image_taken_from_the_layer_cache_takes_its_sbom_from_there_too(monkeypatch, tmp_path):
    """A fresh images folder whose image layer came from the cache reads nothing of the image:
    the SBOM made of that layer's file sits beside it in the cache (issue 81: 38 s a build)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fake = FakeRunner(monkeypatch)
    unlocked = dataclasses.replace(TREE.target("cpu"), python_lock=None, debian_locks=())
    slot = cache.slot("cpu", "image")
    slot.mkdir(parents=True)
    (slot / "key-1.sif").write_text("an image")  # what the build stored before it made the SBOM
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        (folder / "cpu.sif").symlink_to(slot / "key-1.sif")
    made = sbom.ensure(unlocked, first / "cpu.sif", "key-1", apptainer="apptainer")
    assert (slot / "key-1.sbom.json").read_text() == made.read_text()
    fake.commands.clear()
    taken = sbom.ensure(unlocked, second / "cpu.sif", "key-1", apptainer="apptainer")
    assert fake.commands == [] and taken.read_text() == made.read_text()
    os.utime(slot / "key-1.sif", (1, 1))
    for key in ("key-2", "key-3"):  # newer layers: key-1 is pruned, and its SBOM with it
        (tmp_path / key).write_text(key)
        cache.store("cpu", "image", key, tmp_path / key)
    assert not (slot / "key-1.sbom.json").exists()


def test_a_probe_that_prints_no_inventory_is_one_clear_error_and_nothing_is_written(monkeypatch, tmp_path):
    FakeRunner(monkeypatch, answers={"apptainer": "Segmentation fault\n"})
    image = tmp_path / "cpu.sif"
    image.write_text("an image")
    with pytest.raises(ToolError, match="could not read the contents of .*cpu.sif"):
        inventory.read("apptainer", image, "/opt/venv")
    assert sbom.recorded_key(sbom.path_for(image)) is None and list(tmp_path.iterdir()) == [image]


def test_an_image_without_the_probe_is_told_to_be_rebuilt(monkeypatch, tmp_path):
    def run(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 1, "", "/opt/venv/bin/python: No module named smoke.contents\n")

    monkeypatch.setattr(inventory.runner, "run", run)
    with pytest.raises(ToolError, match="cpu.sif has no smoke.contents .*: rebuild it"):
        inventory.read("apptainer", tmp_path / "cpu.sif", "/opt/venv")


def test_the_probe_reads_this_hosts_dpkg_and_python_as_it_reads_an_image():
    """The probe, run as the SBOM runs it by this (Debian) machine's Python with the runtime on
    its path: what it prints is what dpkg-query and importlib.metadata say here."""
    env = {**os.environ, "PYTHONPATH": str(RUNTIME)}
    probe = [sys.executable, *(arg for arg in inventory.PROBE if arg != "-I")]  # -I drops PYTHONPATH
    shown = subprocess.run(probe, capture_output=True, text=True, timeout=60, env=env)
    assert shown.returncode == 0, shown.stderr
    found = json.loads(shown.stdout)
    assert found["os"]["ID"] == "debian"
    debs = {name: version for name, version, _ in found["debs"]}
    dpkg = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "bash"], capture_output=True, text=True, timeout=30)
    assert debs["bash"] == dpkg.stdout
    dists = {name.lower(): version for name, version in found["dists"]}
    assert dists["pytest"] == pytest.__version__


def test_where_apptainer_runs_no_image_the_probe_runs_in_the_unpacked_root_under_proot(tmp_path):
    """The unprivileged build's host (no user namespace): the same probe, by the image's own
    venv, under proot in the root unsquashfs unpacked; proot's seccomp shortcut off."""
    proot = tmp_path / "proot"
    answer = IMAGE_ANSWER.replace("'", "'\\''")
    proot.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" \"$PROOT_NO_SECCOMP\" > {tmp_path}/argv\necho '{answer}'\n")
    proot.chmod(0o755)
    found = inventory.read_unpacked(str(proot), tmp_path / "root", "/opt/venv", tmp_path / "x.sif")
    assert found.debs == (("bash", "5.2.15-2+b7", "amd64"),) and found.dists == (("torch", "2.13.0+cpu"),)
    argv, no_seccomp = (tmp_path / "argv").read_text().splitlines()
    assert argv.startswith(f"-r {tmp_path / 'root'} -w / ") and no_seccomp == "1"
    assert argv.endswith("/opt/venv/bin/python -I -m smoke.contents")
