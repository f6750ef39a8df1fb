"""The SBOM of the real CPU image, as its build left it beside the image: valid CycloneDX,
the pinned torch, DeepSpeed and mpi4py, and the same packages `pip list` and `dpkg -l` show
in the image."""

import json
import subprocess

from conftest import recipe_tree

from builder import sbom
from builder.host import sidecar

TARGET = recipe_tree().target("cpu")


def in_image(apptainer, image, *argv):
    shown = subprocess.run([apptainer, "exec", str(image), *argv], capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def read(cpu_image):
    text = sbom.path_for(cpu_image).read_text()
    return text, json.loads(text)["components"]


def normal(name):
    return name.lower().replace("_", "-").replace(".", "-")


def test_the_build_leaves_a_valid_sbom_of_this_image_beside_it(cpu_image):
    text, _ = read(cpu_image)
    # imported here, not with the module: its jsonschema compiles rfc3987's grammars (2 s)
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    assert sbom.recorded_key(sbom.path_for(cpu_image)) == sidecar.current_key(cpu_image)


def test_the_sbom_lists_the_pinned_torch_deepspeed_and_mpi4py(cpu_image):
    _, found = read(cpu_image)
    versions = {c["name"]: c["version"] for c in found if c["purl"].startswith("pkg:pypi/")}
    assert versions["torch"] == f"{TARGET.torch.version}+cpu"
    assert versions["deepspeed"] == TARGET.deepspeed.version
    assert versions["mpi4py"] == TARGET.mpi.mpi4py
    deepspeed = next(c for c in found if c["name"] == "deepspeed")
    ops = {p["value"] for p in deepspeed["properties"] if p["name"] == "hpcml:deepspeed:op"}
    assert {f"{op}_op" for op in ("cpu_adam", "fused_adam")} <= ops, ops


def test_the_python_packages_are_those_pip_list_shows_in_the_image(apptainer, cpu_image):
    _, found = read(cpu_image)
    listed = json.loads(
        in_image(apptainer, cpu_image, f"{TARGET.python.venv}/bin/python", "-m", "pip", "list", "--format", "json")
    )
    assert {(normal(c["name"]), c["version"]) for c in found if c["purl"].startswith("pkg:pypi/")} == {
        (normal(p["name"]), p["version"]) for p in listed
    }


def test_the_debian_packages_are_those_dpkg_lists_as_installed_in_the_image(apptainer, cpu_image):
    _, found = read(cpu_image)
    rows = [line.split() for line in in_image(apptainer, cpu_image, "dpkg", "-l").splitlines()]
    installed = {(row[1].split(":")[0], row[2]) for row in rows if row and row[0] == "ii"}
    assert {(c["name"], c["version"]) for c in found if c["purl"].startswith("pkg:deb/")} == installed
    assert len(installed) > 50


def test_the_image_holds_exactly_its_lock(cpu_image):
    """Issue 49: 0 components between the SBOM and the lock differ (the build fails otherwise)."""
    from builder.sbom import lock_check

    assert lock_check.differences(sbom.path_for(cpu_image), TARGET.python_lock) == []
    listed = lock_check.image_dists(sbom.path_for(cpu_image))
    locked = {pin.name for step in TARGET.python_lock.steps for pin in step.pins}
    assert set(listed) - locked == set(lock_check.NOT_LOCKED)  # the runtime wheel and the venv's pip


def test_the_image_holds_exactly_its_final_stages_debian_lock(cpu_image):
    """Apptainer's debootstrap of bookworm and the base layer's apt-get, as hpcml lock resolved
    them without building: the same packages at the same versions."""
    from builder.sbom import lock_check

    final = next(deb for deb in TARGET.debian_locks if deb.stage == "final")
    assert lock_check.deb_differences(sbom.path_for(cpu_image), final) == []


def test_the_sbom_records_the_digest_of_the_images_files(apptainer, cpu_image, tmp_path):
    from builder.sbom import rootfs

    image = json.loads(sbom.path_for(cpu_image).read_text())["metadata"]["component"]
    recorded = {p["name"]: p["value"] for p in image["properties"]}[sbom.ROOTFS_PROPERTY]
    assert recorded == rootfs.digest(rootfs.listing(rootfs.unpack(apptainer, cpu_image, tmp_path / "root")))
