"""sbom/lock_check.py: the image's Python distributions, as its SBOM lists them, against the
target's lock; the build's refusal when they differ (the real CPU image's own SBOM is
checked in test_image_sbom.py); and `hpcml verify --lock IMAGE`, an image against its lock."""

import dataclasses
import json

import pytest
from conftest import RECIPES, recipe_tree
from helpers.cli_here import run_here

from builder import lockfile, sbom
from builder.errors import ToolError
from builder.recipes.tree import RecipeTree
from builder.sbom import inventory, lock_check

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
        (
            [("bash", "5.2.15-2+b7", "arm64"), ("tzdata", "2025b-0+deb12u1", "all")],
            ["bash 5.2.15-2+b7 is arm64 in the image, amd64 in the Debian lock"],
        ),
    ],
)
def test_the_debian_packages_of_the_image_against_its_final_stages_lock(tmp_path, debs, expected):
    assert lock_check.deb_differences(write_debs(tmp_path / "x.sbom.json", debs), DEBS) == expected


# --- hpcml verify --lock IMAGE ----------------------------------------------------------

CPU = recipe_tree().target("cpu")
CPU_DEBS = [(p.name, p.version, p.arch) for p in next(d for d in CPU.debian_locks if d.stage == "final").packages]
CPU_DISTS = [(pin.name, pin.version) for step in CPU.python_lock.steps for pin in step.pins]


def cpu_sbom(path, debs=CPU_DEBS, dists=CPU_DISTS, target="cpu"):
    """An SBOM as document.render writes it for an image built from cpu's locks (and the
    venv's own pip, which no lock names)."""
    components = [
        {"name": n, "version": v, "purl": f"pkg:deb/debian/{n}@{v}?arch={a}&distro=debian-12"} for n, v, a in debs
    ]
    components += [{"name": n, "version": v, "purl": f"pkg:pypi/{n}@{v}"} for n, v in [*dists, ("pip", "25.1.1")]]
    properties = [{"name": sbom.PROPERTY + "target", "value": target}] if target else []
    document = {"bomFormat": "CycloneDX", "metadata": {"component": {"name": target, "properties": properties}}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**document, "components": components}))
    return path


def verify(tmp_path, *args):
    return run_here("verify", "--recipes", RECIPES, "--lock", *args, cwd=tmp_path)


def test_an_image_that_holds_its_lock_gets_one_summary_line_and_exit_0(tmp_path):
    cpu_sbom(tmp_path / "images" / "cpu.sbom.json")
    result = verify(tmp_path, "images/cpu.sbom.json")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"images/cpu.sbom.json matches the lock of cpu: {len(CPU_DEBS)} Debian packages, "
        f"{len(CPU_DISTS)} Python distributions\n"
    )
    (tmp_path / "images" / "cpu.sif").write_bytes(b"an image")  # its SBOM beside it is read
    result = verify(tmp_path, "images/cpu.sif")
    assert result.returncode == 0 and result.stdout.startswith("images/cpu.sif matches the lock of cpu: ")


def test_a_changed_an_extra_and_a_missing_package_are_listed_and_exit_1(tmp_path):
    debs = [(n, "0.0-moved" if n == "bash" else v, a) for n, v, a in CPU_DEBS] + [("cowsay", "3.03+dfsg2-8", "all")]
    dists = [(n, v) for n, v in CPU_DISTS if n != "sympy"]
    # no target recorded: the file's name says cpu
    cpu_sbom(tmp_path / "images" / "cpu.sbom.json", debs, dists, target="")
    result = verify(tmp_path, "images/cpu.sbom.json")
    assert result.returncode == 1
    bash = next(v for n, v, _ in CPU_DEBS if n == "bash")
    sympy = next(v for n, v in CPU_DISTS if n == "sympy")
    assert result.stdout.splitlines() == [
        f"bash is 0.0-moved in the image, {bash} in the Debian lock",
        "cowsay 3.03+dfsg2-8 is in the image, not in the Debian lock",
        f"sympy {sympy} is in the Python lock, not in the image",
    ]
    assert result.stderr == (
        "error: images/cpu.sbom.json does not match the lock of cpu: "
        "2 Debian packages and 1 Python distribution differ\n"
    )


def test_target_overrides_what_the_image_records(tmp_path):
    cpu_sbom(tmp_path / "images" / "cpu.sbom.json")
    result = verify(tmp_path, "images/cpu.sbom.json", "--lock-target", "a100-cuda")
    assert result.returncode == 1 and "does not match the lock of a100-cuda: " in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["images/cpu.sbom.json", "--lock-target", "nope"], "command line: unknown target 'nope' (expected one of: "),
        (["images/nope.sbom.json"], "images/nope.sbom.json: its file name names target 'nope', which the recipes"),
        (["images/cpu.sbom.json", "--lock-target", "lumi-rocm"], "target lumi-rocm has no lock to verify against"),
        (["images/none.sif"], "images/none.sif: no such image, and no SBOM beside it"),
    ],
)
def test_a_target_without_a_lock_or_an_unknown_one_is_one_line_exit_2(tmp_path, args, message):
    cpu_sbom(tmp_path / "images" / "cpu.sbom.json")
    cpu_sbom(tmp_path / "images" / "nope.sbom.json", target="")
    result = verify(tmp_path, *args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_an_image_without_an_sbom_is_read_by_its_probe(tmp_path, monkeypatch):
    image = tmp_path / "built.sif"  # the labels name the target, not the file
    image.write_bytes(b"an image")
    # stand-ins for apptainer inspect and the probe (inventory.read)
    monkeypatch.setattr("builder.host.images.read_labels", lambda _, __: labels_of(target="cpu"))
    contents = inventory.Inventory({"ID": "debian"}, tuple(CPU_DEBS), (*CPU_DISTS[1:], ("pip", "25.1.1")), ())
    monkeypatch.setattr(inventory, "read", lambda _, __, venv: contents if venv == CPU.python.venv else None)
    verdict = lock_check.verify(str(image), recipe_tree(), apptainer="apptainer")
    assert verdict.lines == [f"{CPU_DISTS[0][0]} {CPU_DISTS[0][1]} is in the Python lock, not in the image"]
    assert verdict.summary(image) == f"{image} does not match the lock of cpu: 1 Python distribution differs"


def labels_of(**short):
    from builder.labels import LABEL_PREFIX, ImageLabels

    return ImageLabels({f"{LABEL_PREFIX}.{name}": value for name, value in short.items()})
