"""docs/variables.md's table of the variables each site file carries, generated from
render/sitefile.py's SITE_FILE (name and meaning, in the order the file writes them), so that
a new site fact the wrapper reads is written once, in sitefile.py.

`python -m builder.render.variable_docs` rewrites the table under MARKER; the contract's tests
(tests/builder/test_contract.py) fail when it is stale.
"""

import sys
from pathlib import Path

from .. import contract
from ..errors import ToolError
from ..fileio import write_atomic
from . import sitefile

DOC = Path(__file__).resolve().parents[2] / "docs" / "variables.md"
MARKER = "<!-- the table below: python -m builder.render.variable_docs, from render/sitefile.py -->"


def table() -> list:
    lines = [line for line in sitefile.SITE_FILE if line.name != contract.SITE]  # in the users' table
    rows = [f"| `{line.name}` | {sitefile.meaning(line)} |" for line in lines]
    return ["| variable | meaning |", "|----------|---------|", *rows]


def updated(text: str) -> str:
    """``text`` with the table that follows MARKER (after one blank line) made current."""
    lines = text.split("\n")
    if MARKER not in lines:
        raise ToolError(f"{DOC.name}: no line {MARKER!r} to put the site file's table under")
    start = lines.index(MARKER) + 2
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join([*lines[:start], *table(), *lines[end:]])


def main():
    changed = write_atomic(DOC, updated(DOC.read_text()))
    print(f"{'wrote' if changed else 'unchanged'} {DOC.relative_to(DOC.parents[1])}", file=sys.stderr)


if __name__ == "__main__":
    main()
