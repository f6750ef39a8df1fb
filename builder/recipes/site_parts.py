"""The sections of a site file that the site model (site_model.py) reads field by field, and
what follows from their fields. A site fact of plain type (text, a whole number, true or
false) has one home: its field there. Its schema entry and, when the wrapper reads it, its
line in the site file follow from that field.

- The schema: a section's field that the site schema (schemas/site.yaml) does not list gets
  `{type: ...}` from its annotation, and `required` when it has no default. The YAML keeps
  only what a type cannot say: patterns with their `x-expected` words, enums, limits.
- The site file: a field made by `wrapper_reads(default, variable, meaning)` is written to
  every site file under that variable's name (true and false as 1 and 0), and
  docs/variables.md's table names it with its meaning (render/sitefile.py).

Only SitePart sections count: their fields are their keys by the same names. Sections read
by code of their own (slurm, network) and the file's top level keep their schema as written.
"""

import dataclasses
import json
import typing

_JSON_TYPES = {str: "string", int: "integer", bool: "boolean", float: "number"}
WRAPPER = "wrapper"  # metadata key: (variable, meaning, note)


def frozen(value):
    """A YAML value as a frozen field holds it: a list becomes a tuple, a mapping (environment
    variables) ((name, value as text), ...) in file order."""
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        return tuple((name, str(item)) for name, item in value.items())
    return value


class SitePart:
    """A part whose fields are its section's keys by the same names; a key the file leaves
    out takes the field's default (the schema requires those without one)."""

    @classmethod
    def from_yaml(cls, spec):
        return cls(**{f.name: frozen(spec[f.name]) for f in dataclasses.fields(cls) if f.name in spec})


def wrapper_reads(default, variable: str, meaning: str, note: str = ""):
    """A field the wrapper reads from the site file as `variable`; `meaning` goes to
    docs/variables.md, `note` (optional) above the line in each site file."""
    return dataclasses.field(default=default, metadata={WRAPPER: (variable, meaning, note)})


def sections(model, path=()):
    """((key path, part class), ...) of a model's SitePart sections, nested ones too, in
    field order: (("gpu",), Gpu), (("gpu", "driver"), Driver), ..."""
    found = []
    for field in dataclasses.fields(model):
        part = _class_of(field)
        if isinstance(part, type) and issubclass(part, SitePart):
            found.append((path + (field.name,), part))
            found += sections(part, path + (field.name,))
    return tuple(found)


def _class_of(field):
    """The class a field holds: `Driver` of `driver: Driver = None`, `Pool | None` too."""
    args = [arg for arg in typing.get_args(field.type) if arg is not type(None)]
    return args[0] if len(args) == 1 else field.type


def plain_fields(model):
    """((key path, field), ...): every plain field of the model's sections."""
    return tuple(
        (path + (field.name,), field)
        for path, part in sections(model)
        for field in dataclasses.fields(part)
        if _class_of(field) in _JSON_TYPES
    )


def wrapper_fields(model):
    """((key path, variable, meaning, note), ...) of the fields made by wrapper_reads."""
    return tuple((path, *field.metadata[WRAPPER]) for path, field in plain_fields(model) if WRAPPER in field.metadata)


def fingerprint(model) -> str:
    """What the model adds to a schema (its sections, types and required keys), for the
    schema-pass cache's key."""
    return json.dumps(complete({}, model), sort_keys=True)


def complete(schema: dict, model) -> dict:
    """The schema with each section and plain field it does not list added (in place); a
    section it adds is a mapping of those fields alone."""
    for path, _ in sections(model):
        _node(schema, path[:-1]).setdefault("properties", {}).setdefault(
            path[-1], {"type": "object", "additionalProperties": False}
        )
    for path, field in plain_fields(model):
        node = _node(schema, path[:-1])
        node.setdefault("properties", {}).setdefault(path[-1], entry(field))
        if _required(field) and path[-1] not in node.get("required", ()):
            node["required"] = [*node.get("required", ()), path[-1]]
    return schema


def _node(schema: dict, path: tuple) -> dict:
    for key in path:
        schema = schema["properties"][key]
    return schema


def entry(field) -> dict:
    """The schema entry a plain field gives its key: its type."""
    return {"type": _JSON_TYPES[_class_of(field)]}


def _required(field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
