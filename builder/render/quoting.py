"""Values as Lua and Tcl text, for module files (shell text is `shell.py`'s job)."""

import re


def lua_string(value) -> str:
    """A double-quoted Lua string literal."""
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    text = "".join(escapes.get(c, c if c.isprintable() else f"\\{ord(c):03d}") for c in str(value))
    return f'"{text}"'


def lua_long_string(value) -> str:
    """A Lua long bracket string, at a level that no text inside can close early."""
    text = str(value)
    level = 0
    while f"]{'=' * level}]" in text or text.endswith("]" + "=" * level):
        level += 1
    return f"[{'=' * level}[\n{text}]{'=' * level}]"


def tcl_word(value) -> str:
    """A double-quoted Tcl word in which nothing is substituted ($, [ and \\ escaped)."""
    text = re.sub(r'([\\"$\[\]{}])', r"\\\1", str(value))
    return '"' + text.replace("\n", "\\n") + '"'
