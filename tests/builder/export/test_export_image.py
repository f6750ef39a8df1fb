"""`hpcml export` of the real CPU image (issue 35): one export of all three formats for the
module (they share one unpacking of the root filesystem), each then read by the tools its sites
use: podman loads the OCI archive and runs the smoke suite in it under torchrun, skopeo shows
its labels and annotations, unsquashfs lists the enroot squashfs as the SIF's own files, and
tomllib reads the EDF. enroot, Pyxis and the CSCS Container Engine cannot run here: what they
read (/etc/environment, the EDF's keys) is checked, not their run.

Podman runs as root with the settings docs/exporting.md gives (runc, cgroupfs, no default
ulimits, no network), its storage under this module's temporary folder; the blob cache podman
keeps in /var/lib/containers is removed after when the tests made it."""

import json
import os
import shutil
import subprocess
import tempfile
import tomllib
from pathlib import Path

import pytest
from conftest import run_builder

from builder.export import metadata
from builder.host import sif

PODMAN_CONF = '[containers]\ndefault_ulimits = []\n\n[engine]\ncgroup_manager = "cgroupfs"\n'
SYSTEM_STORE = Path("/var/lib/containers")


def run(argv, timeout=300, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, (argv, result.stdout[-3000:], result.stderr[-3000:])
    return result


@pytest.fixture(scope="module")
def exported(cpu_image, apptainer, tmp_path_factory):
    """Every format of the CPU image, exported once, beside a link to the image (removed after:
    1.2 GB that pytest would keep for three sessions)."""
    if os.geteuid() != 0:
        pytest.skip("export --format oci,enroot unpacks the image with its owners: root only")
    images = tmp_path_factory.mktemp("export")
    os.link(cpu_image, images / "cpu.sif")
    result = run_builder(
        "export",
        "cpu",
        "--format",
        "oci,enroot,edf",
        "--images",
        images,
        env={"HPCML_APPTAINER": apptainer},
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    yield images
    shutil.rmtree(images, ignore_errors=True)


@pytest.fixture(scope="module")
def image_facts(exported, apptainer):
    """What the SIF itself says: its root partition, labels (by `apptainer inspect`) and environment."""
    partition = sif.root_partition(apptainer, exported / "cpu.sif")
    inspected = run([apptainer, "inspect", "--json", "--labels", exported / "cpu.sif"]).stdout
    labels = json.loads(inspected)["data"]["attributes"]["labels"]
    return partition, labels, metadata.read(partition, "cpu").environment


@pytest.fixture(scope="module")
def podman(exported, tmp_path_factory):
    """`podman ARGS` with private storage, the archive loaded as localhost/cpu."""
    folder = tmp_path_factory.mktemp("podman")
    (folder / "containers.conf").write_text(PODMAN_CONF)
    env = {**os.environ, "CONTAINERS_CONF": str(folder / "containers.conf"), "TMPDIR": str(folder)}
    # podman refuses a runroot of more than 50 characters, which pytest's folders pass once
    # its count of sessions (pytest-NN) and workers (popen-gwN) grows: a short one of its own
    runroot = Path(tempfile.mkdtemp(prefix="hpcml-podman-", dir="/tmp"))
    base = ["podman", "--root", folder / "storage", "--runroot", runroot, "--runtime", "runc"]
    store_was_there = SYSTEM_STORE.exists()

    def podman(*args, timeout=300):
        return run([*base, *args], timeout=timeout, env=env)

    try:
        assert "localhost/cpu:latest" in podman("load", "-i", exported / "cpu.oci.tar").stdout
        yield podman
    finally:
        subprocess.run([*map(str, base), "system", "reset", "--force"], env=env, capture_output=True, timeout=300)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(runroot, ignore_errors=True)
        if not store_was_there:
            shutil.rmtree(SYSTEM_STORE, ignore_errors=True)


def test_podman_runs_the_smoke_suite_in_the_oci_image(podman):
    suite = ["torchrun", "--standalone", "--nproc-per-node=2", "-m", "smoke", "all", "--sizes", "8:64K"]
    result = podman("run", "--rm", "--network", "none", "localhost/cpu", *suite, "--out", "/tmp/smoke", timeout=400)
    for check in ("allreduce sum", "deepspeed engine", "ddp"):
        assert any(line.startswith(check) and " PASS " in line for line in result.stdout.splitlines()), check
    assert "smoke: PASS" in result.stdout


def test_the_sifs_labels_file_is_what_apptainer_inspect_shows(cpu_image, apptainer):
    """Export reads /.singularity.d/labels.json from the root partition, list, show and publish
    ask `apptainer inspect`: one object of labels, read by one reader (builder/labels.py)."""
    from builder.host import images

    from_file = metadata.read(sif.root_partition(apptainer, cpu_image), "cpu").image_labels
    assert from_file == images.read_labels(apptainer, cpu_image) and from_file.short("target") == "cpu"


def test_the_oci_image_runs_like_apptainer_run(podman, image_facts):
    """The runscript is the entrypoint and the image's environment is the container's."""
    _, _, environment = image_facts
    shown = podman("run", "--rm", "--network", "none", "localhost/cpu", "-c", "import os, sys; print(sys.executable)")
    assert shown.stdout.strip() == "/opt/venv/bin/python"
    env = podman("run", "--rm", "--network", "none", "localhost/cpu", "env").stdout.splitlines()
    assert {f"{name}={value}" for name, value in environment.items()} <= set(env)


def test_skopeo_shows_the_sifs_labels_environment_and_annotations(exported, image_facts):
    _, labels, environment = image_facts
    archive = f"oci-archive:{exported / 'cpu.oci.tar'}"
    config = json.loads(run(["skopeo", "inspect", "--config", archive]).stdout)
    assert config["config"]["Labels"] == labels
    assert config["config"]["Env"] == [f"{name}={value}" for name, value in environment.items()]
    assert environment["PATH"].startswith("/opt/venv/bin:") and environment["VIRTUAL_ENV"] == "/opt/venv"
    created = metadata.build_date(labels[metadata.BUILD_DATE])
    assert config["created"] == created and config["history"][0]["created"] == created
    manifest = json.loads(run(["skopeo", "inspect", "--raw", archive]).stdout)
    assert manifest["annotations"] == {
        **labels,
        "org.opencontainers.image.title": "cpu",
        "org.opencontainers.image.version": "2.13.0",
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.description": json.loads(labels["org.hpc-ml-containers.recipe"])["description"],
    }
    assert [layer["mediaType"] for layer in manifest["layers"]] == ["application/vnd.oci.image.layer.v1.tar+gzip"]


def test_the_enroot_squashfs_holds_the_sifs_files_and_the_environment_for_enroot(exported, image_facts):
    partition, _, environment = image_facts

    def listing(*source):
        """{path: its `ls -l` line}: mode, numeric owner, size, time, path (and a link's target)."""
        lines = [line for line in run(["unsquashfs", "-lln", *source]).stdout.splitlines() if " squashfs-root" in line]
        paths = [line[line.index(" squashfs-root") + 1 :] for line in lines]
        return {path.split(" -> ")[0] if line[0] == "l" else path: line for path, line in zip(paths, lines)}

    in_sif = listing("-offset", partition.offset, partition.image)
    in_squashfs = listing(exported / "cpu.sqsh")
    assert in_squashfs.keys() == in_sif.keys() and len(in_sif) > 30000
    changed = {path for path in in_sif if in_sif[path] != in_squashfs[path]}
    assert changed == {"squashfs-root/etc/environment"}  # owners, modes, sizes, times: the same
    written = run(["unsquashfs", "-cat", exported / "cpu.sqsh", "etc/environment"]).stdout.splitlines()
    assert [line for line in written if not line.startswith("#")] == [f"{k}={v}" for k, v in environment.items()]


def test_the_edf_names_the_squashfs_with_the_keys_cscs_documents(exported, image_facts):
    _, _, environment = image_facts
    edf = tomllib.loads((exported / "cpu.toml").read_text())
    assert set(edf) == {"image", "workdir", "mounts", "env"}  # a CPU image: no NCCL hook
    assert edf["image"] == str((exported / "cpu.sqsh").resolve())
    assert edf["env"] == environment and edf["mounts"] == ["${SCRATCH}:${SCRATCH}"]
