"""Values as TOML text (the EDF that `hpcml export --format edf` writes): a bare key where TOML
allows one, else a basic string, from which TOML's reader gets the value back."""

import re

BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def key(name: str) -> str:
    return name if BARE_KEY.fullmatch(name) else string(name)


def string(value: str) -> str:
    """A TOML basic string; a character that would not print as itself (TOML refuses the
    control characters raw; a line separator would hide part of the line) as its escape."""
    escapes = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
    out = []
    for char in value:
        if char in escapes:
            out.append(escapes[char])
        elif not char.isprintable():
            out.append(f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
