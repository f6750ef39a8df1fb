"""Values as Lua and Tcl text, for module files (shell text is `values/shell.py`'s job). Each reader
gets the value back unchanged, and no character that would not print as itself (a control
character, DEL, a line separator) reaches the file raw (in Tcl, none of the Basic Multilingual
Plane: see tcl_word)."""

import re


def lua_string(value) -> str:
    """A double-quoted Lua string literal; a character that would not print as itself is
    written as the decimal escapes of its UTF-8 bytes (three digits each: a digit after one
    is never read as part of it)."""
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    text = "".join(
        escapes.get(c) or (c if c.isprintable() else "".join(f"\\{byte:03d}" for byte in c.encode()))
        for c in str(value)
    )
    return f'"{text}"'


def lua_long_string(value) -> str:
    """A Lua long bracket string, at a level that no text inside can close early; a quoted
    string (`lua_string`) where the text holds a character other than a newline that would not
    print as itself: Lua reads a carriage return in a long string as a newline."""
    text = str(value)
    if not all(c.isprintable() or c == "\n" for c in text):
        return lua_string(text)
    level = 0
    while f"]{'=' * level}]" in text or text.endswith("]" + "=" * level):
        level += 1
    return f"[{'=' * level}[\n{text}]{'=' * level}]"


def tcl_word(value) -> str:
    """A double-quoted Tcl word in which nothing is substituted ($, [ and \\ escaped), and a
    character of the Basic Multilingual Plane that would not print as itself written as \\n,
    \\r, \\t or \\uXXXX: Tcl's `source` reads a carriage return as a newline and stops at ^Z
    (\\x1a). Tcl 8.6 has no escape for the planes above: their characters stay as they are."""
    text = re.sub(r'([\\"$\[\]{}])', r"\\\1", str(value))
    escapes = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return '"' + "".join(escapes.get(c) or _tcl_char(c) for c in text) + '"'


def _tcl_char(c: str) -> str:
    return c if c.isprintable() or ord(c) > 0xFFFF else f"\\u{ord(c):04x}"
