"""The exact Debian packages an image's base holds, resolved without building it (issue 49).

A minbase debootstrap of a suite installs every package of Priority: required, and apt; the
definition's %post then runs ``apt-get install --no-install-recommends PACKAGES``. `resolve`
asks the host's own apt-get what that installs, with a private apt state in a temporary
folder: its own sources, lists, caches and an empty dpkg status, so that neither /etc/apt,
/var/lib/apt nor the host's dpkg database is read or written, and root is not needed.
Each package comes with the sha256 of its .deb from the downloaded index (host/debian_index.py).
A lock file holds one `DebPackage.line` a package (`format`, `parse_lines`)."""

import os
import re
import tempfile
from pathlib import Path

from .. import runner
from ..errors import RecipeError, ToolError
from ..lockfile import POCKET_ARCHIVES, DebPackage
from . import debian_index

KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
DEBIAN_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}  # the Debian names of the builder's machines
ARCHES = tuple(DEBIAN_ARCH.values())
UPDATE_TIMEOUT_S = 600  # one suite's main index: about 9 MB compressed, 45 MB unpacked
SIMULATE_TIMEOUT_S = 180  # about 2 s for a suite's main; the rest is a margin for slow disks
MINBASE_EXTRA = ("apt",)  # debootstrap --variant=minbase: Priority: required, and these
# debootstrap's own rule for bookworm (scripts/debian-common): the empty usr-is-merged
# stands for the /usr merge it makes itself, in place of usrmerge and the perl it pulls in
SUITE_EXTRA = {"bookworm": ("usr-is-merged",)}
# what Apptainer's debootstrap bootstrap leaves out (its --exclude; the Apptainer binary holds
# "--exclude=openssl,udev,debconf-i18n,e2fsprogs"); the builder's own debootstrap, for an
# image of another architecture, leaves out nothing
APPTAINER_EXCLUDES = ("openssl", "udev", "debconf-i18n", "e2fsprogs")

NAME = r"[a-z0-9][a-z0-9+.-]+"  # Debian policy 5.6.1
VERSION = r"[0-9][A-Za-z0-9.+~:-]*"  # policy 5.6.12: [epoch:]upstream[-revision]
# the sha256 is left out only in a lock made before the locks held them
LINE = re.compile(rf"({NAME})=({VERSION}) (amd64|arm64|all)(?: sha256:([0-9a-f]{{64}}))?")
SUITE = re.compile(r"[a-z][a-z0-9.-]*")
MIRROR = re.compile(r"(https?|file):/[^\s\"\[\];]*")
# Inst NAME[:ARCH] [OLD] (VERSION RELEASE[, RELEASE] [ARCH]) [BROKEN]: OLD only when one is
# installed; BROKEN (often "[]", as for libc6) lists what is unpacked but not configured yet
INST = re.compile(r"Inst ([^\s:]+)\S* (?:\[[^\]]*\] )?\((\S+) [^\[\]]*\[([^\]]+)\]\)(?: \[[^\]]*\])?")


def resolve(
    suite: str,
    arch: str,
    mirror: str,
    packages,
    *,
    exclude=(),
    components=("main",),
    pockets=(),
    security_mirror="",
    workdir=None,
) -> tuple[DebPackage, ...]:
    """The packages a minbase debootstrap of ``suite`` from ``mirror`` for ``arch`` (less
    its ``exclude``), then ``apt-get install --no-install-recommends packages`` from the
    archive areas ``components`` of the suite and its ``pockets`` (updates: the suite's
    archive; security: ``security_mirror``'s), which also brings the bootstrap's packages up
    to the pockets' versions, installs, each with the sha256 of its .deb; sorted by name.
    The private apt state lives in a temporary folder under ``workdir`` (default: the
    system's) and is removed at the end."""
    names = [packages] if isinstance(packages, str) else list(packages)
    urls = {"debian": mirror.rstrip("/"), "debian-security": security_mirror.rstrip("/")}
    # (mirror, suite) each apt source: the suite, then each pocket from its archive's mirror
    sources = [(urls["debian"], suite), *((urls[POCKET_ARCHIVES[p]], f"{suite}-{p}") for p in pockets)]
    _check_input(suite, arch, [url for url, _ in sources], [*names, *exclude, *components])
    with tempfile.TemporaryDirectory(prefix="hpcml-debian-lock-", dir=workdir) as tmp:
        root = Path(tmp)
        # apt run as root downloads as the user _apt, which must reach lists/partial
        root.chmod(0o755)
        env = _private_apt(root, sources, arch, components)
        lists = root / "state" / "lists"
        _update(env, lists, sources, arch)
        # debootstrap takes the required packages of the suite's own index, not its pockets'
        required = [name for name in debian_index.required(lists, suite, "main") if name not in exclude]
        asked = dict.fromkeys([*required, *MINBASE_EXTRA, *SUITE_EXTRA.get(suite, ()), *names])
        found = _simulate(env, list(asked), suite, arch, mirror)
        where = " and ".join(name for _, name in sources)
        return debian_index.hashed(found, lists, f"{where} {arch} from {mirror}")


def parse_lines(text: str, where: str) -> tuple[DebPackage, ...]:
    """The packages of a lock file's ``text`` as `format` wrote it; blank lines and lines
    starting with # are skipped. ``where`` names the file in errors."""
    found, first = [], {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = LINE.fullmatch(line)
        if not match:
            raise RecipeError(
                f"expected 'NAME=VERSION ARCH sha256:HEX' (ARCH amd64, arm64 or all), found {line!r}",
                file=where,
                line=number,
            )
        if match[1] in first:
            raise RecipeError(f"{match[1]} listed twice (first at line {first[match[1]]})", file=where, line=number)
        first[match[1]] = number
        found.append(DebPackage(match[1], match[2], match[3], match[4] or ""))
    return tuple(sorted(found))


def format(packages) -> str:
    """One `DebPackage.line` a package, sorted by name, each ending in a newline."""
    return "".join(package.line() + "\n" for package in sorted(packages))


def _check_input(suite, arch, mirrors, names):
    # the values go into apt's configuration and sources.list: nothing there may be quoted
    if not SUITE.fullmatch(suite):
        raise RecipeError(f"Debian suite {suite!r}: expected a name such as bookworm")
    if arch not in ARCHES:
        raise RecipeError(f"Debian architecture {arch!r}: expected one of {', '.join(ARCHES)}")
    for mirror in mirrors:
        if not MIRROR.fullmatch(mirror):
            raise RecipeError(f"Debian mirror {mirror!r}: expected an http(s):// or file:/ URL")
    bad = [name for name in names if not re.fullmatch(NAME, str(name))]
    if bad:
        raise RecipeError(f"Debian package name {bad[0]!r}: expected lower-case letters, digits and + . -")


def _private_apt(root: Path, sources, arch, components=("main",)) -> dict:
    """Write the private apt state under ``root``; return the environment that points apt at
    it. APT_CONFIG is read first and names an empty parts folder, so that none of the host's
    /etc/apt/apt.conf.d (compressed lists, extra index targets, hooks) applies."""
    state, empty = root / "state", root / "empty"
    for folder in (state / "lists" / "partial", root / "cache" / "archives" / "partial", empty):
        folder.mkdir(parents=True)
    (state / "status").write_text("")  # nothing installed: debootstrap starts from nothing
    lines = []
    for mirror, suite in sources:
        if mirror.startswith("file:"):
            trust = "trusted=yes"  # a test's mirror: no signature to check
        elif KEYRING.is_file():
            trust = f"signed-by={KEYRING}"
        else:
            raise ToolError(f"{KEYRING} is missing, so {mirror} cannot be checked; install debian-archive-keyring")
        lines.append(f"deb [arch={arch} {trust}] {mirror} {suite} {' '.join(components)}\n")
    (root / "sources.list").write_text("".join(lines))
    settings = {
        "Dir::Etc::main": "/dev/null",
        "Dir::Etc::parts": empty,
        "Dir::Etc::sourcelist": root / "sources.list",
        "Dir::Etc::sourceparts": empty,
        "Dir::Etc::preferences": "/dev/null",
        "Dir::Etc::preferencesparts": empty,
        "Dir::Etc::trusted": "/dev/null",
        "Dir::Etc::trustedparts": empty,
        "Dir::State": state,
        "Dir::State::status": state / "status",
        "Dir::Cache": root / "cache",
        "APT::Architecture": arch,
        "APT::Architectures": arch,
        "Debug::NoLocking": "1",  # no lock files: the state is this call's alone
        "Acquire::Languages": "none",
        "Acquire::GzipIndexes": "false",  # plain Packages files that debian_index reads
        "Acquire::Retries": "2",
        "Acquire::http::Timeout": "60",
        "Acquire::https::Timeout": "60",
    }
    config = "".join(f'{key} "{value}";\n' for key, value in settings.items())
    (root / "apt.conf").write_text(config)
    # LC_ALL=C: the messages read below are apt's English ones
    return dict(os.environ, APT_CONFIG=str(root / "apt.conf"), LC_ALL="C")


def _update(env, lists: Path, sources, arch):
    result = runner.run(["apt-get", "update"], env=env, check=False, timeout=UPDATE_TIMEOUT_S)
    output = result.stdout + result.stderr
    # an http mirror that does not answer is only a warning to apt (exit status 0)
    failed = [line for line in output.splitlines() if "Failed to fetch" in line or line.startswith("E: ")]
    if result.returncode != 0 or failed or not list(lists.glob("*_Packages")):
        reason = failed[0][3:] if failed else f"exit status {result.returncode}, no Packages index came"
        asked = ", ".join(f"{suite} from {mirror}" for mirror, suite in sources)
        raise ToolError(f"apt-get update: no index for {arch} of {asked}: {' '.join(reason.split())}")


def _simulate(env, names, suite, arch, mirror) -> tuple[DebPackage, ...]:
    argv = ["apt-get", "install", "--simulate", "--no-install-recommends", "-o", "APT::Get::Show-Versions=1"]
    result = runner.run([*argv, "--", *names], env=env, check=False, timeout=SIMULATE_TIMEOUT_S)
    if result.returncode != 0:
        output = result.stdout + result.stderr
        unknown = re.findall(r"^E: Unable to locate package (\S+)", output, re.M)
        if unknown:
            listed = ", ".join(dict.fromkeys(unknown))
            raise ToolError(f"not in {suite} main of {mirror} for {arch}: {listed}")
        errors = [line[3:] for line in output.splitlines() if line.startswith("E: ")]
        # apt names the first package it cannot satisfy on stdout, its E: line only says so
        errors += [" ".join(line.split()) for line in output.splitlines() if " : Depends: " in line][:1]
        reason = "; ".join(errors) or f"exit status {result.returncode}"
        raise ToolError(f"apt-get install --simulate for {suite} {arch} failed: {reason}")
    found = set()
    for line in result.stdout.splitlines():
        if line.startswith("Inst "):
            match = INST.fullmatch(line)
            if not match:  # a package left out would make the lock wrong without a word
                raise ToolError(f"apt-get install --simulate for {suite} {arch}: cannot read {line!r}")
            found.add(DebPackage(*match.groups()))
    if not found:
        raise ToolError(f"apt-get install --simulate for {suite} {arch} listed no package to install")
    return tuple(sorted(found))
