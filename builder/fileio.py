"""Atomic writes (a reader sees the old file or the new one, never half of either), the
removal of a folder tree an unpacked image left, and a file the user named read or refused in
one line."""

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from .errors import RecipeError


def read_given(path: Path, expected: str) -> str:
    """A text file the user named, as UTF-8; one line naming it when it is missing (``expected``
    says what it should have been) or cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError(f"no such file; expected {expected}", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise RecipeError(f"cannot read it: {error}", file=str(path)) from None


def write_atomic(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` unless it already holds exactly that; True if written."""
    # a command line's bytes that are not UTF-8 reach Python as surrogates: written back as the
    # same bytes, so a script passes on an argument exactly as it was typed
    return write_bytes_atomic(path, text.encode(errors="surrogateescape"))


def write_bytes_atomic(path: Path, data: bytes) -> bool:
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def link_or_copy(source, dest):
    """A hard link where the file system allows it (same inode, no space), else a copy that
    keeps the mode and times, as the link would."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)


CHUNK = 1 << 20


def sha256_file(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def copy_hashed(source, dest) -> str:
    """Copy ``source`` to the new file ``dest`` and return the sha256 of the bytes written:
    one read of a large image gives both the copy and its checksum."""
    digest = hashlib.sha256()
    with open(source, "rb") as src, open(dest, "xb") as out:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest()


def remove_tree(folder: Path):
    """Remove ``folder``, also where an unpacked image left directories its owner may not
    write (a 555 folder stops rmtree for anyone but root)."""
    if not folder.exists():
        return
    for parent, dirs, _ in os.walk(folder):
        for name in dirs:
            path = os.path.join(parent, name)
            if not os.path.islink(path):
                os.chmod(path, os.lstat(path).st_mode | 0o700)
    shutil.rmtree(folder, ignore_errors=True)
