"""Merge rules for targets that `extends:` another (documented in docs/recipes.md)."""

import shutil

from conftest import RECIPES, run_builder

from builder.recipes.merge import Origin, merge
from builder.recipes.tree import RecipeTree
from builder.recipes.yamlsrc import Document


def doc(name):
    return Document(name, {}, {})


def test_mappings_merge_key_by_key_and_base_only_keys_stay():
    base = {"deepspeed": {"accelerator": "cuda", "ops": {"cpu_adam": True, "gds": False}}}
    child = {"deepspeed": {"ops": {"gds": True}}}
    merged = merge(base, Origin(doc("base")), child, doc("child"))
    assert merged == {"deepspeed": {"accelerator": "cuda", "ops": {"cpu_adam": True, "gds": True}}}


def test_lists_and_scalars_are_replaced_whole():
    base = {"sites": ["puhti", "mahti"], "description": "base", "os": {"packages": {"final": ["a", "b"]}}}
    child = {"sites": ["mahti"], "os": {"packages": {"final": []}}}
    merged = merge(base, Origin(doc("base")), child, doc("child"))
    assert merged["sites"] == ["mahti"]  # never concatenated
    assert merged["os"]["packages"]["final"] == []  # a child can empty a list
    assert merged["description"] == "base"  # inherited when not overridden


def test_a_mapping_replaced_by_a_scalar_takes_the_child_value():
    merged = merge({"torch": {"flavour": "cpu"}}, Origin(doc("base")), {"torch": "x"}, doc("child"))
    assert merged == {"torch": "x"}


def test_errors_point_at_the_file_that_set_the_value():
    base_doc, child_doc = doc("base.yaml"), doc("child.yaml")
    origin = Origin(base_doc)
    merge({"a": {"b": 1, "c": 2}}, origin, {"a": {"c": 3}}, child_doc)
    assert origin.doc_for(("a", "b")) is base_doc
    assert origin.doc_for(("a", "c")) is child_doc


def test_inherited_targets_resolve_like_their_base(tree):
    v100, csc = (tree.target(n).resolved for n in ("v100-cuda", "csc-cuda"))
    a100, h100 = (tree.target(n).resolved for n in ("a100-cuda", "h100-cuda"))
    for key in ("stages", "os", "python", "torch", "cuda_toolkit", "deepspeed", "comm", "mpi"):
        assert v100[key] == csc[key] and a100[key] == h100[key], key
    assert (v100["gpu_archs"], csc["gpu_archs"]) == (["sm_70"], ["sm_70", "sm_80"])
    assert (a100["gpu_archs"], h100["gpu_archs"]) == (["sm_80"], ["sm_90"])


def test_chains_of_extends_resolve_to_the_root(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    (recipes / "targets" / "h100-lean.yaml").write_text(
        "extends: h100-cuda\ndescription: lean\npython: {packages: []}\n"
    )
    tree = RecipeTree(recipes)
    lean = tree.target("h100-lean").resolved
    assert lean["sites"] == ["jean-zay-h100"] and lean["python"]["packages"] == {}
    assert lean["deepspeed"] == tree.target("a100-cuda").resolved["deepspeed"]


def test_an_error_inherited_from_a_base_names_the_base_file(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    base = recipes / "targets" / "v100-cuda.yaml"
    base.write_text(base.read_text().replace("  skip:\n", "  skip:\n    nosuch_op: not wanted\n"))
    result = run_builder("check", "--recipes", recipes)
    assert result.returncode == 2
    assert f"{recipes}/targets/v100-cuda.yaml:" in result.stderr
    assert "nosuch_op" in result.stderr
