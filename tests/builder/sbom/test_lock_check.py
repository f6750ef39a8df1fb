"""sbom/lock_check.py: the image's Python distributions, as its SBOM lists them, against the
target's lock; and the build's refusal when they differ (the real CPU image's own SBOM is
checked in test_image_sbom.py)."""

import dataclasses
import json

import pytest
from conftest import RECIPES

from builder import lockfile, sbom
from builder.errors import ToolError
from builder.recipes.tree import RecipeTree
from builder.sbom import lock_check

HASH = "cd" * 32
LOCK = lockfile.PythonLock(
    "cpu",
    "3.11",
    "x86_64-manylinux_2_36",
    (
        lockfile.Step("torch", "torch==2.13.0", (lockfile.Pinned("torch", "2.13.0+cpu", (HASH,)),)),
        lockfile.Step(
            "extras",
            "numpy==2.4.6",
            (lockfile.Pinned("numpy", "2.4.6", (HASH,)), lockfile.Pinned("typing-extensions", "4.16.0", (HASH,))),
        ),
    ),
    "recipes/locks/cpu/python.txt",
)


def write_sbom(path, dists, key="key-1"):
    """An SBOM as document.render writes it: each distribution a pypi component."""
    components = [{"name": n, "version": v, "purl": f"pkg:pypi/{n.lower()}@{v}"} for n, v in dists]
    components.append({"name": "bash", "version": "5.2.15-2+b7", "purl": "pkg:deb/debian/bash@5.2.15-2%2Bb7"})
    properties = [{"name": sbom.KEY_PROPERTY, "value": key}]
    path.write_text(json.dumps({"metadata": {"component": {"properties": properties}}, "components": components}))
    return path


EXACT = [("torch", "2.13.0+cpu"), ("numpy", "2.4.6"), ("typing_extensions", "4.16.0")]


def test_an_image_built_from_its_lock_differs_in_nothing(tmp_path):
    # the runtime wheel and the venv's pip are the image's own, each for its reason
    found = write_sbom(tmp_path / "x.sbom.json", [*EXACT, ("hpc-ml-runtime", "0.1.0"), ("pip", "23.0.1")])
    assert lock_check.differences(found, LOCK) == []


@pytest.mark.parametrize(
    "dists, expected",
    [
        (EXACT[:2], ["typing-extensions 4.16.0 is in the lock, not in the image"]),
        ([*EXACT, ("regex", "2026.11.19")], ["regex 2026.11.19 is in the image, not in the lock"]),
        ([EXACT[0], ("numpy", "2.4.7"), EXACT[2]], ["numpy is 2.4.7 in the image, 2.4.6 in the lock"]),
    ],
)
def test_a_missing_an_extra_and_a_moved_distribution_are_named(tmp_path, dists, expected):
    assert lock_check.differences(write_sbom(tmp_path / "x.sbom.json", dists), LOCK) == expected


def test_a_build_whose_image_does_not_hold_its_lock_fails_naming_them_and_keeps_the_sbom(tmp_path):
    target = dataclasses.replace(RecipeTree(RECIPES).target("cpu"), python_lock=LOCK, debian_locks=())
    image = tmp_path / "cpu.sif"
    image.write_text("an image")
    made = write_sbom(sbom.path_for(image), [*EXACT, ("regex", "2026.11.19")])
    with pytest.raises(ToolError) as caught:
        sbom.ensure(target, image, "key-1", apptainer="apptainer")  # the SBOM is this key's: no probe
    message = str(caught.value)
    assert message.startswith(f"{image} does not hold its lock recipes/locks/cpu/python.txt (1 Python")
    assert message.endswith("regex 2026.11.19 is in the image, not in the lock") and "\n" not in message
    assert made.is_file()
    write_sbom(made, EXACT)
    assert sbom.ensure(target, image, "key-1", apptainer="apptainer") == made


DEBS = lockfile.DebianLock(
    "final",
    "bookworm",
    "amd64",
    ("main",),
    ("python3",),
    (lockfile.DebPackage("bash", "5.2.15-2+b7", "amd64"), lockfile.DebPackage("tzdata", "2025b-0+deb12u1", "all")),
    "recipes/locks/cpu/debian-final.txt",
)


def write_debs(path, debs):
    components = [
        {"name": n, "version": v, "purl": f"pkg:deb/debian/{n}@{v}?arch={a}&distro=debian-12"} for n, v, a in debs
    ]
    path.write_text(json.dumps({"components": components}))
    return path


@pytest.mark.parametrize(
    "debs, expected",
    [
        ([("bash", "5.2.15-2+b7", "amd64"), ("tzdata", "2025b-0+deb12u1", "all")], []),
        (
            [("bash", "5.2.15-2+b8", "amd64"), ("tzdata", "2025b-0+deb12u1", "all")],
            ["bash is 5.2.15-2+b8 in the image, 5.2.15-2+b7 in the Debian lock"],
        ),
        ([("bash", "5.2.15-2+b7", "amd64")], ["tzdata 2025b-0+deb12u1 is in the Debian lock, not in the image"]),
        (
            [("bash", "5.2.15-2+b7", "amd64"), ("tzdata", "2025b-0+deb12u1", "all"), ("perl", "5.36.0-7", "amd64")],
            ["perl 5.36.0-7 is in the image, not in the Debian lock"],
        ),
    ],
)
def test_the_debian_packages_of_the_image_against_its_final_stages_lock(tmp_path, debs, expected):
    assert lock_check.deb_differences(write_debs(tmp_path / "x.sbom.json", debs), DEBS) == expected
