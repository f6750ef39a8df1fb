"""A bundle's list of files: `SHA256SUMS` at its top, one `<sha256>  <path>` line a file,
sorted by path, as `sha256sum -c SHA256SUMS` reads it (so a site can check a bundle without
the builder). `check` reads every file back; the build trusts a bundle only after it.

Example: write(Path("bundles/cpu"), {"python/numpy-2.4.6-...whl": "89cd..."}); check(...)
"""

import re
from pathlib import Path

from ..errors import RecipeError, ToolError
from ..fileio import sha256_file, write_atomic

NAME = "SHA256SUMS"
PATH = r"[A-Za-z0-9][A-Za-z0-9._+~%@=/-]*"  # a path inside the bundle, as a line may name it
_LINE = re.compile(rf"(?P<sha256>[0-9a-f]{{64}})  (?P<path>{PATH})")


def write(bundle: Path, files: dict) -> None:
    """``files``: {path relative to the bundle: sha256}."""
    write_atomic(bundle / NAME, "".join(f"{files[path]}  {path}\n" for path in sorted(files)))


def require(bundle: Path, remake: str) -> None:
    """A folder given as a bundle with no list in it is a usage error (exit 2), said before
    anything is read; ``remake``: the command that makes one."""
    if not (bundle / NAME).is_file():
        raise RecipeError(f"{bundle}: no {NAME} there, so not a bundle; make one with: {remake}", file="command line")


def read(bundle: Path) -> dict:
    """{path: sha256} as the bundle lists them; a ToolError in one line when it cannot be read."""
    listing = bundle / NAME
    try:
        text = listing.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ToolError(
            f"{listing}: not a bundle's list of files ({error.__class__.__name__}); make one with: hpcml bundle TARGET"
        ) from None
    files = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _LINE.fullmatch(line)
        if not match or ".." in match["path"].split("/"):
            raise ToolError(f"{listing}:{number}: expected '<sha256>  <path inside the bundle>', found {line[:80]!r}")
        files[match["path"]] = match["sha256"]
    return files


def check(bundle: Path, files: dict = None) -> dict:
    """Every listed file is there with its sha256; returns {path: sha256}. A missing or changed
    file is refused in one line that names it."""
    files = read(bundle) if files is None else files
    for path, sha256 in sorted(files.items()):
        where = bundle / path
        if not where.is_file():
            raise ToolError(f"{where}: missing from the bundle; make it again with: hpcml bundle TARGET --out {bundle}")
        got = sha256_file(where)
        if got != sha256:
            raise ToolError(
                f"{where}: its sha256 is {got}, the bundle lists {sha256}: the file was changed or "
                "damaged; nothing was built. Make the bundle again, or take a copy you trust"
            )
    return files


def size(bundle: Path, files: dict) -> int:
    return sum((bundle / path).stat().st_size for path in files)
