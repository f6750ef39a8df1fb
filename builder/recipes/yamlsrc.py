"""Read one YAML file into plain data, remembering the line of every key and item.

PyYAML's composer keeps a mark for every node; we build the data from the nodes ourselves so
each value's path maps to its line, and so duplicate keys (silently merged by PyYAML) are
reported as the typos they usually are.
"""

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import RecipeError

_scalars = yaml.SafeLoader("")  # only its constructor is used, for scalar tags


@dataclass
class Document:
    file: str
    data: dict
    lines: dict = field(default_factory=dict)  # path tuple -> 1-based line

    def line_of(self, path):
        path = tuple(path)
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, 1)

    def error(self, path, message):
        return RecipeError(message, file=self.file, line=self.line_of(path), path=path)


def load(path: Path, shown: str) -> Document:
    """Load a YAML mapping from ``path``; ``shown`` is the name used in messages."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RecipeError(f"cannot read the file ({exc.strerror})", file=shown) from None
    if b"\0" in raw:
        raise RecipeError("binary data, expected YAML text", file=shown, line=1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise RecipeError("not UTF-8 text, expected YAML", file=shown, line=line) from None
    if not text.strip():
        raise RecipeError("empty file, expected a YAML mapping", file=shown, line=1)
    try:
        node = _compose(text)
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, shown) from None
    except yaml.YAMLError as exc:
        raise RecipeError(f"YAML error: {exc}".splitlines()[0], file=shown, line=1) from None
    if node is None:
        raise RecipeError("no YAML content, expected a mapping", file=shown, line=1)
    doc = Document(shown, {}, {(): node.start_mark.line + 1})
    data = _build(node, (), doc)
    if not isinstance(data, dict):
        raise RecipeError(
            f"expected a mapping at the top level, found {kind_of(data)}", file=shown, line=node.start_mark.line + 1
        )
    doc.data = data
    return doc


def _compose(text):
    """The node tree: by libyaml when PyYAML has it (several times faster, the same nodes and
    marks), and by PyYAML's own parser for a file libyaml refuses, so that a mistake is always
    described in the same words."""
    loader = safe_loader()
    if loader is not yaml.SafeLoader:
        try:
            return yaml.compose(text, Loader=loader)
        except yaml.YAMLError:
            pass
    return yaml.compose(text, Loader=yaml.SafeLoader)


def safe_loader():
    """libyaml's safe loader when PyYAML was built with it (several times faster), else PyYAML's."""
    return getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader


def _syntax_error(exc, shown):
    problem = exc.problem or exc.context or "invalid YAML"
    if exc.context and "flow" in exc.context and exc.context_mark:
        # an unclosed [ or {: PyYAML stops where it gave up; the bracket is the mistake
        return RecipeError(
            f"YAML syntax error: a bracket opened on this line is not closed "
            f"({problem} on line {exc.problem_mark.line + 1})",
            file=shown,
            line=exc.context_mark.line + 1,
        )
    mark = exc.problem_mark or exc.context_mark
    return RecipeError(f"YAML syntax error: {problem}", file=shown, line=mark.line + 1 if mark else 1)


def _build(node, path, doc):
    if isinstance(node, yaml.MappingNode):
        out = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise RecipeError("a key must be a plain word, found a collection", file=doc.file, line=line, path=path)
            key = key_node.value
            if key in out:
                raise RecipeError(
                    f"duplicate key '{key}' (first at line {doc.lines[path + (key,)]})",
                    file=doc.file,
                    line=line,
                    path=path,
                )
            doc.lines[path + (key,)] = line
            out[key] = _build(value_node, path + (key,), doc)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            doc.lines[path + (index,)] = item.start_mark.line + 1
            items.append(_build(item, path + (index,), doc))
        return items
    try:
        return _scalars.construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        raise RecipeError(
            f"cannot read this value: {getattr(exc, 'problem', exc)}",
            file=doc.file,
            line=node.start_mark.line + 1,
            path=path,
        ) from None


def kind_of(value):
    """How a value reads in an error message: 'a list', 'the number 3', ..."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the text {shown!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
