"""A target's Python lock, `recipes/locks/<target>/python.txt`: every distribution pip puts
into the image, by the step that installs it, each at one version with the sha256 of every
file a build may take (issue 49). `hpcml lock` writes it (builder/locking); the building
blocks read it (render/pip_install.py), so that pip installs exactly it: `--no-deps
--require-hashes`, nothing resolved at build time.

The file is a pip requirements file with hashes (pip-tools' and uv's format, so `pip install
--require-hashes -r` reads it as it is), with comment lines the builder reads as well:

    # platform: python 3.11, x86_64-manylinux_2_36
    # step torch: torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu
    torch==2.13.0+cpu --hash=sha256:6746...  # torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
    filelock==3.20.0 --hash=sha256:...  # filelock-3.20.0-py3-none-any.whl

A step's header line holds what the block asked for when the lock was made: when the block
asks for something else now (a pin moved in versions.yaml), the lock is stale for that step.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from .errors import RecipeError

# the newest manylinux tag uv 0.13 resolves for: an OS with a newer glibc takes these wheels
MANYLINUX_NEWEST = 40
LOCKS_DIR = "locks"  # under the recipes folder, so a lock travels with the recipes it locks
PYTHON_LOCK = "python.txt"
_PLATFORM = re.compile(r"^# platform: python (?P<python>\d+\.\d+), (?P<platform>[a-z0-9_]+-[a-z0-9_]+)$")
_STEP = re.compile(r"^# step (?P<step>[a-z0-9_]+): (?P<asked>\S.*)$")
PIN_LINE = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;]+)"
    r"(?P<hashes>(?: --hash=sha256:[0-9a-f]{64})+)(?:  # (?P<files>\S.*))?$"
)


@dataclass(frozen=True)
class Pinned:
    """One distribution: name==version, the sha256 of each file pip may take (the wheels
    for the image's platform, or the sdist where the image builds from source)."""

    name: str
    version: str
    hashes: tuple
    files: tuple = ()

    def line(self) -> str:
        hashes = "".join(f" --hash=sha256:{h}" for h in self.hashes)
        files = f"  # {', '.join(self.files)}" if self.files else ""
        return f"{self.name}=={self.version}{hashes}{files}"

    def requirement(self) -> str:
        """The line pip reads, without the file names."""
        return f"{self.name}=={self.version}" + "".join(f" --hash=sha256:{h}" for h in self.hashes)


@dataclass(frozen=True)
class Step:
    name: str  # the block that installs it: torch, mpi, frameworks...
    asked: str  # what the block asked for, as one line: requirements, then pip options
    pins: tuple  # (Pinned, ...) in the order pip should read them

    def extra_indexes(self) -> list:
        """The --extra-index-url values the step asked with (PyTorch's index for torch)."""
        words = self.asked.split()
        return [words[i + 1] for i, word in enumerate(words[:-1]) if word == "--extra-index-url"]


@dataclass(frozen=True)
class PythonLock:
    target: str
    python: str  # "3.11"
    platform: str  # uv's --python-platform: x86_64-manylinux_2_36
    steps: tuple  # (Step, ...) in the order the image installs them
    path: str = ""  # where it was read from, for errors

    def step(self, name):
        return next((step for step in self.steps if step.name == name), None)

    def text(self, command: str) -> str:
        lines = [
            f"# Python lock of target {self.target}, written by `{command}`; do not edit by hand.",
            "# Every distribution the build's pip installs, by step, with the sha256 of each file it",
            "# may take; the build installs exactly these (pip --no-deps --require-hashes).",
            f"# platform: python {self.python}, {self.platform}",
        ]
        for step in self.steps:
            lines.append(f"# step {step.name}: {step.asked}")
            lines += [pin.line() for pin in step.pins]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class StaleLock:
    """A lock made for another Python or platform than the target's now: installing from it
    is refused with ``message``."""

    message: str


def platform_of(target, versions: dict):
    """(python, uv platform) of the image the target's venv is made in, from versions.yaml's
    image_platforms; None when the table has no entry for it (a site's image)."""
    build = next(stage for stage in target.stages if stage.name == "build")
    keys = [key for key, image in versions.get("images", {}).items() if image == build.image]
    found = [versions.get("image_platforms", {}).get(key) for key in keys]
    entry = next((f for f in found if f), None)
    if entry is None:
        return None
    return entry["python"], manylinux(target.arch, entry["glibc"])


def manylinux(arch: str, glibc: str) -> str:
    """uv's platform of an image with this glibc: x86_64, "2.36" -> x86_64-manylinux_2_36."""
    return f"{arch}-manylinux_2_{min(int(glibc.split('.')[1]), MANYLINUX_NEWEST)}"


def checked(lock, target, versions: dict):
    """``lock`` as the target may use it: a StaleLock when made for another platform."""
    if lock is None or (lock.python, lock.platform) == platform_of(target, versions):
        return lock
    return StaleLock(
        f"{lock.path}: the lock is stale: made for python {lock.python} on {lock.platform}, the target's "
        f"image is {platform_of(target, versions)}; refresh it with: hpcml lock {target.name}"
    )


def parse_pin(line: str) -> Pinned:
    """A line PIN_LINE matches, as the Pinned it writes."""
    match = PIN_LINE.match(line)
    hashes = tuple(re.findall(r"sha256:([0-9a-f]{64})", match["hashes"]))
    files = tuple(match["files"].split(", ")) if match["files"] else ()
    return Pinned(match["name"], match["version"], hashes, files)


def normal_name(name: str) -> str:
    """PEP 503's normal form, as the lock writes names: Jinja2 -> jinja2, typing_extensions ->
    typing-extensions, zope.interface -> zope-interface."""
    return re.sub(r"[-_.]+", "-", name).lower()


def path_of(recipes, target: str) -> Path:
    return Path(recipes, LOCKS_DIR, target, PYTHON_LOCK)


def load(recipes, target: str):
    """The target's lock, or None when it has none."""
    path = path_of(recipes, target)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise RecipeError(f"cannot read the lock: {error}", file=str(path)) from None
    return parse(text, target, str(path))


def parse(text: str, target: str, path: str = "") -> PythonLock:
    """One-line RecipeError naming the line that is not what `hpcml lock` writes."""
    python = platform = None
    steps = []  # [name, asked, [Pinned]]
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if match := _PLATFORM.match(line):
            python, platform = match["python"], match["platform"]
        elif match := _STEP.match(line):
            steps.append((match["step"], match["asked"], []))
        elif line.startswith("#"):
            continue
        elif PIN_LINE.match(line) and steps:
            steps[-1][2].append(parse_pin(line))
        else:
            expected = "NAME==VERSION --hash=sha256:HEX" if steps else "a '# step NAME: ...' line first"
            raise RecipeError(f"not a line of a lock: {line[:60]!r}; expected {expected}", file=path, line=number)
    if python is None:
        raise RecipeError("no '# platform: python X.Y, PLATFORM' line; run hpcml lock again", file=path)
    return PythonLock(target, python, platform, tuple(Step(n, a, tuple(p)) for n, a, p in steps), path)


# --- the Debian half: recipes/locks/<target>/debian-<stage>.txt ---------------------------

_DEB_HEADER = re.compile(r"^# debian: (?P<suite>[a-z][a-z0-9.-]*) (?P<arch>amd64|arm64) (?P<components>[a-z ,-]+)$")
_DEB_ASKED = re.compile(r"^# asked: (?P<asked>.*)$")
_DEB_POCKETS = re.compile(r"^# pockets: (?P<pockets>[a-z ]*)$")
# the archive each pocket of a suite is in: Debian's security updates have an archive (and
# mirror) of their own, the point-release updates are in the suite's archive
POCKET_ARCHIVES = {"updates": "debian", "security": "debian-security"}
# the sha256 is left out only in a lock made before the locks held them (`fits` refuses those)
_DEB_LINE = re.compile(
    r"^(?P<name>[a-z0-9][a-z0-9+.-]+)=(?P<version>[0-9][A-Za-z0-9.+~:-]*) (?P<arch>amd64|arm64|all)"
    r"(?: sha256:(?P<sha256>[0-9a-f]{64}))?$"
)


@dataclass(frozen=True, order=True)
class DebPackage:
    name: str
    version: str
    arch: str  # amd64, arm64 or all
    # of the .deb, as the suite's signed Packages index gives it: 64 lower-case hex digits,
    # "" read from an old lock line; so a lock proves the bytes, not only the version
    sha256: str = ""

    def line(self) -> str:
        digest = f" sha256:{self.sha256}" if self.sha256 else ""
        return f"{self.name}={self.version} {self.arch}{digest}"


@dataclass(frozen=True)
class DebianLock:
    """The Debian packages of one stage's root: the bootstrap's and what the layer's
    apt-get install adds (``asked``), as a build from the suite's mirror takes them."""

    stage: str  # build (the devel layer) or final (the base layer, under the image)
    suite: str
    arch: str
    components: tuple
    asked: tuple  # the packages the stage's apt-get install names, sorted
    packages: tuple  # (DebPackage, ...) sorted by name
    path: str = ""
    # the suite's pockets it takes too (updates, security), as a Debian stable system does;
    # () in a lock made before the locks took them
    pockets: tuple = ()

    def suites(self) -> tuple:
        """(archive, suite) of each suite the stage's apt reads: the suite, then its pockets
        (archive "debian" is the mirror's, "debian-security" the security mirror's)."""
        return (("debian", self.suite), *((POCKET_ARCHIVES[p], f"{self.suite}-{p}") for p in self.pockets))

    def text(self, target: str, command: str) -> str:
        lines = [
            f"# Debian lock of target {target}, its {self.stage} stage, written by `{command}`; do not edit.",
            "# The packages its root holds: the bootstrap's and those its apt-get install adds.",
            f"# debian: {self.suite} {self.arch} {','.join(self.components)}",
            f"# pockets: {' '.join(self.pockets)}",
            f"# asked: {' '.join(self.asked)}",
        ]
        return "\n".join([*lines, *(p.line() for p in self.packages)]) + "\n"


def debian_path_of(recipes, target: str, stage: str) -> Path:
    return Path(recipes, LOCKS_DIR, target, f"debian-{stage}.txt")


def load_debian(recipes, target: str, stage: str):
    """The stage's Debian lock, or None when the target has none."""
    return read_debian(debian_path_of(recipes, target, stage), stage)


def read_debian(path: Path, stage: str):
    """The Debian lock in the file at ``path`` (of ``stage``), or None when there is none."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    header, asked, pockets, packages = None, (), (), []
    for number, line in enumerate(text.splitlines(), 1):
        if match := _DEB_HEADER.match(line):
            header = match
        elif match := _DEB_POCKETS.match(line):
            pockets = tuple(match["pockets"].split())
            if not set(pockets) <= POCKET_ARCHIVES.keys():
                raise RecipeError(f"pockets {pockets}: expected updates and security", file=str(path), line=number)
        elif match := _DEB_ASKED.match(line):
            asked = tuple(match["asked"].split())
        elif match := _DEB_LINE.match(line):
            packages.append(DebPackage(match["name"], match["version"], match["arch"], match["sha256"] or ""))
        elif line.strip() and not line.startswith("#"):
            raise RecipeError(
                f"not a line of a Debian lock: {line[:60]!r}; expected NAME=VERSION ARCH sha256:HEX",
                file=str(path),
                line=number,
            )
    if header is None:
        raise RecipeError("no '# debian: SUITE ARCH COMPONENTS' line; run hpcml lock again", file=str(path))
    components = tuple(header["components"].split(","))
    packages = tuple(sorted(packages))
    return DebianLock(stage, header["suite"], header["arch"], components, asked, packages, str(path), pockets)
