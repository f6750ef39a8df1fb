"""A plain site fact has one home, its field in the site model: the schema and the site file
follow from it (builder/recipes/site_parts.py)."""

import dataclasses

import yaml

from builder.recipes import site_parts, validate
from builder.recipes.section import Section
from builder.recipes.site_model import Scratch, Site
from builder.recipes.site_parts import SitePart, wrapper_reads


@dataclasses.dataclass(frozen=True)
class Inner(SitePart):
    size: int
    label: str = wrapper_reads("", "EXAMPLE_LABEL", "a label", note="above the line")


@dataclasses.dataclass(frozen=True)
class Outer(SitePart):
    on: bool = False
    ratio: float = 0.5
    names: tuple = ()  # not plain: its schema is written by hand
    inner: Inner | None = None


@dataclasses.dataclass(frozen=True)
class Model:
    name: str  # the top level is no part: never derived
    outer: Outer


def test_each_plain_field_gets_its_type_and_a_field_without_default_is_required():
    schema = site_parts.complete({"type": "object", "properties": {"outer": {"type": "object"}}}, Model)
    outer = schema["properties"]["outer"]
    assert outer["properties"]["on"] == {"type": "boolean"}
    assert outer["properties"]["ratio"] == {"type": "number"}
    assert "names" not in outer["properties"] and "name" not in schema["properties"]
    inner = outer["properties"]["inner"]
    assert (inner["type"], inner["additionalProperties"]) == ("object", False)
    assert inner["properties"] == {"size": {"type": "integer"}, "label": {"type": "string"}}
    assert inner["required"] == ["size"] and "required" not in outer


def test_what_the_schema_writes_wins_over_the_type():
    written = {"properties": {"outer": {"properties": {"ratio": {"type": "number", "maximum": 1}}}}}
    schema = site_parts.complete(written, Model)
    assert schema["properties"]["outer"]["properties"]["ratio"] == {"type": "number", "maximum": 1}


def test_the_wrapper_fields_carry_their_variable_meaning_and_note():
    label = (("outer", "inner", "label"), "EXAMPLE_LABEL", "a label", "above the line")
    assert site_parts.wrapper_fields(Model) == (label,)


def test_a_changed_field_changes_the_schema_key():
    """A check that passed under the old model is not trusted under the new one."""
    changed = dataclasses.make_dataclass("Outer", [("on", int, 0)], bases=(SitePart,), frozen=True)
    other = dataclasses.make_dataclass("Model", [("outer", changed)], frozen=True)
    assert site_parts.fingerprint(Model) != site_parts.fingerprint(other)


def test_a_part_reads_its_keys_by_their_names():
    scratch = Scratch.from_yaml(Section(None, dict(tmpdir="/tmp", tmpdir_in_memory=True, make_dirs=["A"])))
    assert (scratch.tmpdir, scratch.tmpdir_in_memory, scratch.make_dirs) == ("/tmp", True, ("A",))


def test_the_site_schema_writes_no_plain_entry_its_model_gives():
    """Held to one home: a written entry of a plain field says more than the field's type."""
    written = yaml.safe_load(validate._schema_text("site"))
    for path, field in site_parts.plain_fields(Site):
        node = written
        for key in path[:-1]:
            node = node["properties"][key]
        entry = node.get("properties", {}).get(path[-1])
        assert entry != site_parts.entry(field), f"{'.'.join(path)}: the schema repeats the model's type"


def test_every_plain_field_of_the_site_is_in_the_schema_checks_use():
    schema = validate.schema("site")
    for path, _ in site_parts.plain_fields(Site):
        node = schema
        for key in path:
            node = node["properties"][key]
        assert node, path
