"""sbom/diff.py and `hpcml diff`: what changed between two images, read from their SBOMs;
small documents shaped as document.render writes them, one made by document.render itself,
and the real CPU image's SBOM against a copy with one distribution moved."""

import json
import shutil

import pytest
from conftest import RECIPES
from helpers.cli_here import run_here
from helpers.sbom_docs import DEBS, DISTS, FACTS, KEY, document_json, write

from builder import sbom
from builder.errors import RecipeError
from builder.recipes.tree import RecipeTree
from builder.sbom import diff, document, inventory


def differences(**changes) -> list:
    """The report's lines from DISTS, DEBS, OPS and FACTS to them with ``changes``."""
    before, after = json.loads(document_json()), json.loads(document_json(**changes))
    return diff.text(before, after, diff.compare(before, after)).splitlines()


def test_the_op_property_is_the_one_document_writes():
    assert diff.OP_PROPERTY == document.OP_PROPERTY


def test_identical_documents_show_their_keys_and_no_differences():
    assert differences() == [f"A: cpu layer key {KEY[:12]}", f"B: cpu layer key {KEY[:12]}", "no differences"]


def test_python_distributions_added_removed_and_changed_by_their_normal_name():
    moved = {"jinja2": "3.1.7", "numpy": "2.4.6", "deepspeed": "0.19.8", "regex": "2026.11.19"}
    assert differences(dists=moved)[2:] == [
        "Python distributions",
        "  added    regex 2026.11.19",
        "  removed  six 1.17.0",
        "  changed  jinja2 3.1.6 -> 3.1.7",  # Jinja2 and jinja2 are one distribution
        "3 changes",
    ]


def test_debian_packages_added_removed_and_changed_and_a_foreign_arch_by_its_arch():
    moved = (("bash", "5.2.15-2+b8", "amd64"), ("libc6", "2.36-9", "amd64"), ("libc6", "2.36-9", "i386"))
    assert differences(debs=moved)[2:] == [
        "Debian packages",
        "  added    libc6:i386 2.36-9",
        "  removed  adduser 3.134",
        "  changed  bash 5.2.15-2+b7 -> 5.2.15-2+b8",
        "3 changes",
    ]


def test_deepspeed_ops_added_and_removed():
    assert differences(ops=("cpu_adam_op", "cpu_lion_op"))[2:] == [
        "DeepSpeed ops",
        "  added    cpu_lion_op",
        "  removed  fused_adam_op",
        "2 changes",
    ]


def test_image_facts_changed_but_not_the_layer_key_which_the_header_shows():
    facts = {**FACTS, "layer-key": "f" * 64, "nccl.version": "2.28.9"}
    assert differences(facts={**facts, "arch": "aarch64"}) == [
        f"A: cpu layer key {KEY[:12]}",
        f"B: cpu layer key {'f' * 12}",
        "Image facts",
        "  changed  arch x86_64 -> aarch64",
        "  changed  nccl.version (none) -> 2.28.9",
        "2 changes",
    ]


def test_sections_come_in_their_order_and_every_change_counts():
    lines = differences(dists={**DISTS, "six": "1.18.0"}, debs=DEBS[1:2], ops=(), facts={"target": "cpu"})
    assert [line for line in lines if not line.startswith(" ")] == [
        "A: cpu layer key 7b82619304ca",
        "Python distributions",
        "Debian packages",
        "DeepSpeed ops",
        "Image facts",
        "6 changes",
    ]


def test_documents_made_by_document_render_compare(tmp_path):
    target = RecipeTree(RECIPES).target("cpu")
    labels = {"version.torch": "2.13.0", "org.label-schema.build-date": "Friday_27_November_2026_4:59:33_UTC"}
    contents = inventory.Inventory(
        os={"ID": "debian", "VERSION_ID": "12"},
        debs=(("bash", "5.2.15-2+b7", "amd64"),),
        dists=(("deepspeed", "0.19.8"), ("typing_extensions", "4.15.0")),
        ops=("cpu_adam_op",),
    )
    moved = inventory.Inventory(contents.os, contents.debs, (("deepspeed", "0.19.8"),), ("cpu_adam_op", "cpu_lion_op"))
    before = json.loads(document.render(target, "k1", labels, contents))
    after = json.loads(document.render(target, "k2", {**labels, "nccl.version": "2.28.9"}, moved))
    assert diff.text(before, after, diff.compare(before, after)).splitlines() == [
        "A: cpu layer key k1",
        "B: cpu layer key k2",
        "Python distributions",
        "  removed  typing_extensions 4.15.0",
        "DeepSpeed ops",
        "  added    cpu_lion_op",
        "Image facts",
        "  changed  nccl.version (none) -> 2.28.9",
        "3 changes",
    ]


def test_an_empty_sbom_has_no_components_key_and_everything_is_removed(tmp_path):
    empty = tmp_path / "empty.sbom.json"  # as cyclonedx writes a document with no components
    empty.write_text(json.dumps({"bomFormat": "CycloneDX", "metadata": {"component": {"name": "cpu"}}}))
    result = run_here("diff", write(tmp_path / "full.sbom.json"), empty)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "11 changes"  # 4 distributions, 3 packages, 2 ops, arch and target


def test_an_image_an_sbom_file_and_a_published_version_folder_are_read(tmp_path):
    images = tmp_path / "images"
    write(images / "cpu.sbom.json")
    (images / "cpu.sif").write_bytes(b"SIF")
    published = tmp_path / "appl" / "pytorch" / "2.13-cpu"
    write(published / sbom.PUBLISHED, dists={**DISTS, "numpy": "2.4.7"})
    expected = json.loads(document_json())
    assert diff.load(str(images / "cpu.sif")) == expected == diff.load(str(images / "cpu.sbom.json"))
    assert diff.load(str(published))["components"][-3]["version"] == "2.4.7"
    assert diff.load(str(published / sbom.PUBLISHED)) == diff.load(str(published))
    result = run_here("diff", images / "cpu.sif", published)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2:] == ["Python distributions", "  changed  numpy 2.4.6 -> 2.4.7", "1 change"]


def test_exit_code_is_1_on_differences_only_when_asked(tmp_path):
    a, b = write(tmp_path / "a.sbom.json"), write(tmp_path / "b.sbom.json", ops=())
    assert run_here("diff", a, b).returncode == 0
    assert run_here("diff", a, b, "--exit-code").returncode == 1
    same = run_here("diff", "--exit-code", a, a)
    assert same.returncode == 0 and same.stdout.endswith("no differences\n"), same.stderr


@pytest.fixture
def places(tmp_path):
    good = write(tmp_path / "good.sbom.json")
    (tmp_path / "old.sif").write_bytes(b"SIF")
    (tmp_path / "cpu.base.sif").write_bytes(b"SIF")
    (tmp_path / "folder").mkdir()
    (tmp_path / "list.sbom.json").write_text("[1, 2]")
    (tmp_path / "odd.sbom.json").write_text('{"components": [1]}')
    (tmp_path / "broken.sbom.json").write_text("{")
    (tmp_path / "notes.txt").write_text("x")
    return tmp_path, good


@pytest.mark.parametrize(
    "name, says",
    [
        ("notes.txt", "expected an image (.sif), a project env (.sqsh), an SBOM (*.sbom.json, sbom.cdx.json) or a"),
        ("folder", "a folder without sbom.cdx.json; expected an image (.sif)"),
        ("old.sif", "no SBOM beside it ({folder}/old.sbom.json); run make build TARGET=old, which writes it"),
        ("cpu.base.sif", "a layer below {folder}/cpu.sif, which alone has an SBOM; compare that image"),
        ("gone.sif", "no such image, and no SBOM beside it ({folder}/gone.sbom.json)"),
        ("gone.sbom.json", "not found; expected an image (.sif)"),
        ("list.sbom.json", "not a CycloneDX SBOM: it has no list of components"),
        ("odd.sbom.json", "not a CycloneDX SBOM: its components are no list of objects"),
        ("broken.sbom.json", "not a readable JSON SBOM (Expecting property name"),
    ],
)
def test_anything_else_is_one_line_naming_it_and_exit_2(places, name, says):
    folder, good = places
    result = run_here("diff", good, folder / name)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: {folder / name}: {says.format(folder=folder)}"), result.stderr
    assert result.stdout == ""
    with pytest.raises(RecipeError):
        diff.load(str(folder / name))


def test_the_real_cpu_sbom_against_a_copy_with_one_distribution_moved(cpu_image, tmp_path):
    real = sbom.path_for(cpu_image)
    copy = json.loads(real.read_text())
    numpy = next(c for c in copy["components"] if c["name"] == "numpy")
    before, numpy["version"] = numpy["version"], "9.9.9"
    (tmp_path / "moved.sbom.json").write_text(json.dumps(copy))
    shutil.copy(real, tmp_path / "same.sbom.json")
    result = run_here("diff", cpu_image, tmp_path / "moved.sbom.json", "--exit-code")
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[2:] == ["Python distributions", f"  changed  numpy {before} -> 9.9.9", "1 change"]
    assert run_here("diff", cpu_image, tmp_path / "same.sbom.json").stdout.endswith("\nno differences\n")
