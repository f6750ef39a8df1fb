"""Recipe data that passed its schema once, remembered by content in the user's cache.

Every command loads and checks every recipe file, and checking means importing jsonschema
(about 0.2 s) and validating 31 documents (about 0.1 s): half of a command's start-up. A
document whose data and schema are the same as in a check that passed is not checked again.

The key is the SHA-256 of the schema file's text, the partial flag and ``repr`` of the data:
plain values from YAML (str, int, float, bool, None, dates, lists, dicts), whose ``repr``
tells 1 from '1' and true from 'true'. Only passes are kept, so an error is always found
afresh, with its line and words. Correctness never depends on the file: an unreadable,
missing or read-only one only means checking again.
"""

import hashlib
from functools import cache

from ..fileio import write_atomic
from ..host.cache import cache_dir

KEEP = 2000  # keys kept, newest last: a few dozen per recipes tree
_FILE = "schema-passes"


def key(schema_text: str, partial: bool, data) -> str:
    text = f"{schema_text}\0{partial}\0{data!r}"
    return hashlib.sha256(text.encode()).hexdigest()


def _path():
    return cache_dir() / _FILE


@cache
def _known() -> dict:
    """The stored keys (as dict keys: ordered, quick to look up), and those found since."""
    try:
        return dict.fromkeys(_path().read_text().split())
    except (OSError, UnicodeDecodeError):
        return {}


_new = []  # passes found by this process, stored by save()


def passed(found_key: str) -> bool:
    return found_key in _known()


def remember(found_key: str) -> None:
    if found_key not in _known():
        _known()[found_key] = None
        _new.append(found_key)


def save() -> None:
    """Store this process's new passes in one write (a tree's files are checked in a row)."""
    if not _new:
        return
    _new.clear()
    kept = list(_known())[-KEEP:]
    try:
        write_atomic(_path(), "\n".join(kept) + "\n")
    except OSError:  # a read-only cache: the next command checks again
        pass
