"""Loading shared libraries the way RCCL, torch and libfabric do, and reading back which files
this process then mapped: what each netcheck stands on. Fail is a check's expected failure;
its message is the one line the check prints. Linux only (/proc/self/maps).

Example: load("/opt/rocm/lib/librccl.so.1", "RCCL"); mapped_named("libfabric.so")
"""

import ctypes
import os

LOAD_MODE = os.RTLD_NOW | os.RTLD_GLOBAL


class Fail(Exception):
    """An expected failure: its message is the one line the check prints."""


def load(path, what, mode=LOAD_MODE):
    """dlopen ``path``; a loader error (missing file, missing dependency, undefined symbol)
    becomes a Fail that names ``what`` and quotes the loader."""
    try:
        return ctypes.CDLL(path, mode=mode)
    except OSError as error:
        raise Fail(f"cannot load {what} {path}: {error}") from None


def mapped_files():
    """Paths of the files this process has mapped, in first-mapped order."""
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.read().splitlines()
    except OSError as error:
        raise Fail(f"cannot read /proc/self/maps ({error}); these checks need Linux") from None
    paths = []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/"):
            path = fields[5].removesuffix(" (deleted)")
            if path not in paths:
                paths.append(path)
    return paths


def mapped_named(prefix, exclude=None):
    """Mapped files whose basename starts with ``prefix`` (and not with ``exclude``)."""
    return [
        path
        for path in mapped_files()
        if os.path.basename(path).startswith(prefix) and not (exclude and os.path.basename(path).startswith(exclude))
    ]


def inside(path, directory):
    """Whether ``path`` lies in ``directory``, symlinks resolved on both sides."""
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory


def last_line(*texts):
    """The last non-empty line of the first text that has one (a tool's error, briefly)."""
    for text in texts:
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return "(no output)"
