"""Check recipe data against the JSON Schemas in builder/recipes/schemas/, one clear line per error."""

import copy
import importlib.util
import re
import sys
import types
from functools import cache
from importlib import resources

import yaml

from . import schema_passes, site_parts
from .site_model import Site
from .yamlsrc import Document, kind_of, safe_loader

_JSON_TYPES = {
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "nothing",
}


@cache
def _schema_text(name: str) -> str:
    return resources.files(__package__).joinpath("schemas", f"{name}.yaml").read_text()


# schemas completed by a model's plain fields (site_parts.complete): {schema name: model}
_MODELS = {"site": Site}


@cache
def schema(name: str, partial: bool = False) -> dict:
    loaded = yaml.load(_schema_text(name), Loader=safe_loader())  # our own files: no line marks needed
    if name in _MODELS:
        loaded = site_parts.complete(loaded, _MODELS[name])
    return _without_required(copy.deepcopy(loaded)) if partial else loaded


@cache
def _schema_key(name: str) -> str:
    """What a check's outcome depends on besides the data: the schema's text and the model's
    plain fields, whose entries the text may leave out."""
    return _schema_text(name) + (site_parts.fingerprint(_MODELS[name]) if name in _MODELS else "")


# Format checkers jsonschema registers on import, each by one function of a package that is
# slow to import: {package: function}. They get stand-ins that import the real package on a
# format check's first call (the SBOM's iri and uri checks), never to start a command.
_LAZY_FORMAT_PACKAGES = {"rfc3987_syntax": "is_valid_syntax", "rfc3986_validator": "validate_rfc3986"}


@cache
def jsonschema_lazily():
    """jsonschema, imported on a command's first validation, not at start-up.

    Its import registers every format checker whose package is installed, and
    rfc3987_syntax (iri formats, via cyclonedx-python-lib[json-validation]) compiles three
    Earley grammars on import: about a second for each command; rfc3986_validator compiles
    its URI grammar's regexes (50 ms). Our schemas use no format, so jsonschema gets
    stand-ins that import the real modules on the first check that needs them.
    """
    lazy = {name: function for name, function in _LAZY_FORMAT_PACKAGES.items() if _stands_in_well(name)}
    if "jsonschema" in sys.modules or not lazy:
        import jsonschema

        return jsonschema
    for name, function in lazy.items():
        sys.modules[name] = _stand_in(name, function)
    try:
        import jsonschema
    finally:
        for name in lazy:
            del sys.modules[name]  # later imports get the real module
    return jsonschema


def _stands_in_well(name) -> bool:
    return name not in sys.modules and importlib.util.find_spec(name) is not None


def _stand_in(name, function):
    module = types.ModuleType(name)

    def call_the_real_one(*args, **kwargs):
        return getattr(importlib.import_module(name), function)(*args, **kwargs)

    setattr(module, function, call_the_real_one)
    return module


def _without_required(node):
    """A file that `extends:` another may leave out keys its base provides."""
    if isinstance(node, dict):
        node.pop("required", None)
        node.pop("minProperties", None)
        for value in node.values():
            _without_required(value)
    elif isinstance(node, list):
        for value in node:
            _without_required(value)
    return node


def check(doc: Document, data: dict, name: str, partial: bool = False, origin=None) -> None:
    """Raise the first schema error (in file order) as a RecipeError.

    ``origin`` (a merge.Origin) names the file each key path came from, for merged targets.
    Data that passed before is not checked again (schema_passes).
    """
    passes_key = schema_passes.key(_schema_key(name), partial, data)
    if schema_passes.passed(passes_key):
        return
    validator = jsonschema_lazily().Draft202012Validator(schema(name, partial))
    errors = list(validator.iter_errors(data))
    if not errors:
        schema_passes.remember(passes_key)
        return
    located = [_locate(doc, error) for error in errors]
    located.sort(key=lambda item: (doc.line_of(item[0]), len(item[0])))
    path, message = located[0]
    raise (origin or doc).error(path, message)


def _locate(doc, error):
    """Return (key path, message) for one jsonschema error."""
    path = tuple(error.absolute_path)
    value, rule = error.instance, error.validator
    if rule == "additionalProperties" and isinstance(value, dict):
        allowed = sorted(error.schema.get("properties", {}))
        extra = [key for key in value if key not in allowed]
        if extra and allowed:
            return path + (extra[0],), (f"unknown key '{extra[0]}' (expected one of: {', '.join(allowed)})")
    if rule == "required":
        missing = re.match(r"'([^']+)'", error.message)
        return path, f"missing required key '{missing.group(1) if missing else error.message}'"
    if rule == "propertyNames":
        key = error.instance
        hint = error.schema.get("x-expected", "a valid name")
        return path + (key,), f"bad key {key!r}: expected {hint}"
    if rule == "type":
        wanted = error.validator_value
        wanted = wanted if isinstance(wanted, list) else [wanted]
        words = error.schema.get("x-expected") or " or ".join(_JSON_TYPES.get(w, w) for w in wanted)
        return path, f"expected {words}, found {kind_of(value)}"
    if rule == "enum":
        options = ", ".join(str(o) for o in error.validator_value)
        return path, f"expected one of: {options}; found {kind_of(value)}"
    if rule == "pattern":
        hint = error.schema.get("x-expected", f"text matching {error.validator_value}")
        return path, f"expected {hint}, found {kind_of(value)}"
    if rule == "uniqueItems":
        return path, "has the same item twice; expected each item once"
    if rule in ("minItems", "minLength", "minProperties"):
        return path, f"is empty; expected at least {error.validator_value} item(s)"
    if rule in ("minimum", "maximum", "exclusiveMinimum"):
        return path, f"expected a value within the {rule} {error.validator_value}, found {kind_of(value)}"
    return path, error.message.splitlines()[0]
