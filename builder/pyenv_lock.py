"""A project env's lock: every Python distribution a researcher's env adds on top of a
target's image, each at one version with the sha256 of every file pip may take, and the image
lock it was resolved against. `hpcml env lock` writes it (builder/locking/pyenv.py); `hpcml
env build` installs exactly it (builder/layerbuild/pyenv.py).

It is a pip requirements file with hashes, as the image's own lock (builder/lockfile.py), so
`pip install --no-deps --require-hashes -r` reads it as it is; its comment lines say what it
was made for, and the builder reads them back:

    # image: cpu, python 3.11, x86_64-manylinux_2_36, lock sha256 6a6c...
    # asked: requirements.txt: rich==14.1.0 einops
    rich==14.1.0 --hash=sha256:...  # rich-14.1.0-py3-none-any.whl

`lock sha256` is the sha256 of the target's own lock (recipes/locks/<target>/python.txt) at the
time: the env holds nothing that lock holds, and is built only on an image of it. A target
without a lock (LUMI's, a site's own image) is locked against its built image instead:
`image distributions sha256` names the distributions that image holds.
"""

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import RecipeError
from .fileio import read_given
from .lockfile import PIN_LINE, Pinned, parse_pin

# the script that makes an env in the image, and reads an image's facts for `env lock`
INSIDE = Path(__file__).with_name("pyenv_inside.py")

SUFFIX = ".lock"  # requirements.txt and target cpu: requirements.cpu.lock
# what the env was resolved against: the target's lock (its sha256), or, for a target without
# one, the built image's distributions (their digest, builder/pyenv_inside.py's)
LOCK, IMAGE = "lock", "image distributions"
_IMAGE = re.compile(
    r"^# image: (?P<target>[a-z0-9][a-z0-9._-]*), python (?P<python>\d+\.\d+), "
    r"(?P<platform>[a-z0-9_]+-[a-z0-9_]+), (?P<kind>lock|image distributions) sha256 (?P<lock>[0-9a-f]{64})$"
)
_ASKED = re.compile(r"^# asked: (?P<source>[^:]+): (?P<asked>.*)$")


@dataclass(frozen=True)
class PyenvLock:
    target: str
    python: str  # "3.11"
    platform: str  # uv's --python-platform, the image's
    image_lock: str  # sha256 of the target's python.txt it was resolved against
    source: str  # the requirements file's name, as the user gave it (for the header)
    asked: tuple  # the requirements as written, in their file's order
    pins: tuple  # (Pinned, ...) sorted by name: what the env adds
    path: str = ""  # where it was read from, for errors
    kind: str = LOCK  # what image_lock is the sha256 of: LOCK or IMAGE

    def text(self, command: str) -> str:
        lines = [
            f"# Project env lock for image {self.target}, written by `{command}`; do not edit by hand.",
            "# Every distribution the env adds to the image, with the sha256 of each file pip may take;",
            "# `hpcml env build` installs exactly these (pip --no-deps --require-hashes), none of the image's.",
            f"# image: {self.target}, python {self.python}, {self.platform}, {self.kind} sha256 {self.image_lock}",
            f"# asked: {self.source}: {' '.join(self.asked)}",
        ]
        return "\n".join([*lines, *(pin.line() for pin in self.pins)]) + "\n"

    def digest(self) -> str:
        """The sha256 of the pins alone: what the env holds, whatever its header says."""
        return hashlib.sha256("".join(f"{pin.requirement()}\n" for pin in self.pins).encode()).hexdigest()


def default_path(requirements: Path, target: str) -> Path:
    """requirements.txt beside which the lock goes: requirements.cpu.lock."""
    return requirements.with_name(f"{requirements.stem}.{target}{SUFFIX}")


def load(path) -> PyenvLock:
    """The lock in ``path``; one line naming the file (and line) when it is none."""
    return parse(read_given(path, "a lock that `hpcml env lock` wrote"), str(path))


def parse(text: str, path: str = "") -> PyenvLock:
    header = asked = None
    pins = []
    for number, line in enumerate(text.splitlines(), 1):
        if match := _IMAGE.match(line):
            header = match
        elif match := _ASKED.match(line):
            asked = match
        elif not line.strip() or line.startswith("#"):
            continue
        elif PIN_LINE.match(line):
            pins.append(parse_pin(line))
        else:
            raise RecipeError(
                f"not a line of an env lock: {line[:60]!r}; expected NAME==VERSION --hash=sha256:HEX",
                file=path,
                line=number,
            )
    if header is None:
        raise RecipeError(
            "no '# image: TARGET, python X.Y, PLATFORM, lock sha256 HEX' line; not an env lock that "
            "`hpcml env lock` wrote",
            file=path,
        )
    return PyenvLock(
        header["target"],
        header["python"],
        header["platform"],
        header["lock"],
        asked["source"] if asked else "",
        tuple(asked["asked"].split()) if asked else (),
        tuple(pins),
        path,
        header["kind"],
    )


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def lock_digest(python_lock) -> str:
    """What an env lock's `lock sha256` names: the sha256 of the target's python.txt."""
    return sha256_text(Path(python_lock.path).read_text(encoding="utf-8"))


__all__ = ["Pinned", "PyenvLock", "default_path", "load", "parse", "sha256_text"]
