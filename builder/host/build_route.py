"""Which way this host lets `build` run Apptainer, told before a build writes anything
(issue 51). Sites differ: root on a workstation or CI runner; `--fakeroot` on a login node,
with user namespaces (Jean Zay's prepost nodes) or, where a setuid Apptainer maps a subuid
range, without them (Roihu: CSC's containers overview, as recipes/sites/roihu.yaml cites it);
neither on LUMI, where SingularityCE (3.11 and later) builds without privilege when `proot`
is on PATH (CSC's guide to containers on LUMI: `module load LUMI systools`). With Apptainer
there, or any runtime, and a proot that translates statx (5.2 and later), the builder runs
the definition's steps itself under proot in an unpacked image (`unpacked`, as cotainr
does; layerbuild/unpacked.py). Both build only from an image (`Bootstrap: localimage`), so
they take the targets on a site's own image (lumi-laif); a Debian root needs root or
--fakeroot.

`facts()` reads the host; `decide(facts)` is pure, so each case is tested without the host.

Example: decide(Facts(root=False, runtime="/usr/bin/apptainer", userns=True, subids=True,
setuid=False, fakeroot_command=False)) -> Route("fakeroot", "user namespace with ...", None)
"""

import functools
import os
import pwd
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import runner
from ..errors import SetupError, ToolError
from . import toolbox
from .images import installed_apptainer

PROOT_NOTE = (
    "where SingularityCE 3.11+ is the runtime, proot on PATH lets it build a target on a site's image "
    "without privilege (on LUMI: module load LUMI systools); cotainr is the other way: "
    "docs/lumi.md#lumi-on-the-sites-own-image"
)
# SingularityCE's `--version`: "singularity-ce version 4.1.3-jammy"; proot builds from 3.11
SINGULARITYCE_VERSION = re.compile(r"singularity-ce version (\d+)\.(\d+)")
PROOT_BUILDS_FROM = (3, 11)
NO_SECCOMP = "PROOT_NO_SECCOMP"  # proot's own switch: trace every call, not a seccomp-chosen few
STATX_PROBE = "/hpcml-statx-probe"  # no host has it: only proot's bind shows it


@dataclass(frozen=True)
class Facts:
    root: bool  # effective uid 0
    runtime: str | None  # an installed apptainer or singularity; None: none on PATH
    userns: bool  # this user can make a user namespace (unshare -U -r ran)
    subids: bool  # /etc/subuid and /etc/subgid give this user a range (a full ID map)
    setuid: bool  # the runtime's setuid starter is installed (it maps IDs without newuidmap)
    fakeroot_command: bool  # `fakeroot` on PATH: Apptainer's fallback for a one-ID namespace
    toolbox_reason: str | None = None  # why no toolbox can be provisioned (None: one can)
    toolbox_ready: bool = False  # one was provisioned before
    proot: str | None = None  # proot on PATH
    proot_builds: bool = False  # the runtime builds under proot when unprivileged (SingularityCE 3.11+)
    proot_statx: bool = False  # proot translates statx's path (5.2+): an image's ls and cp see its files


@dataclass(frozen=True)
class Route:
    name: str | None  # "root", "toolbox", "fakeroot", "proot", "unpacked"; None: no build can run here
    detail: str  # how, for doctor's row
    blocker: str | None = None  # one line: what is missing and what the site must provide


def decide(facts: Facts) -> Route:
    if facts.runtime is None:
        if facts.toolbox_ready and facts.root:
            return Route("toolbox", "the toolbox's Apptainer, as root (no Apptainer installed)")
        if facts.toolbox_reason is None:
            return Route("toolbox", "no Apptainer installed: `build` provisions a toolbox under the cache (root)")
        return Route(
            None,
            "no Apptainer",
            "no apptainer or singularity on PATH: load the site's module (module load apptainer) or have "
            f"Apptainer 1.1+ installed; {facts.toolbox_reason}",
        )
    if facts.root:
        return Route("root", f"{facts.runtime} as root")
    if facts.subids and (facts.userns or facts.setuid):
        how = "user namespace" if facts.userns else "setuid starter"
        return Route("fakeroot", f"{facts.runtime} --fakeroot: {how} with this user's /etc/subuid range")
    if facts.userns:
        helper = " and the fakeroot command" if facts.fakeroot_command else " (no fakeroot command: some may fail)"
        return Route("fakeroot", f"{facts.runtime} --fakeroot: a one-ID user namespace{helper}; no /etc/subuid range")
    if facts.proot_builds and facts.proot:
        return Route("proot", f"{facts.runtime} under {facts.proot}, no privilege: targets on a site's image only")
    if facts.proot and facts.proot_statx:
        return Route(
            "unpacked",
            f"no privilege: the builder unpacks the site's image into your folder and runs the steps under "
            f"{facts.proot}, packing with {facts.runtime}; targets on a site's image only",
        )
    if facts.proot:
        return Route(
            None,
            f"{facts.runtime}, no user namespaces, {facts.proot} too old",
            f"this host lets you build no image yet: {facts.proot} does not translate statx (proot before 5.2), "
            "so the image's own ls and cp would see this host's files; put proot 5.2 or newer first on PATH",
        )
    if facts.proot_builds:
        return Route(
            None,
            f"{facts.runtime}, no user namespaces, no proot",
            "this host lets you build no image yet: SingularityCE builds without privilege when proot is on "
            "PATH; load it (on LUMI: module load LUMI systools) and retry",
        )
    return Route(
        None,
        f"{facts.runtime}, no user namespaces",
        "this host lets you build no image: Apptainer's --fakeroot needs unprivileged user namespaces "
        "(sysctl user.max_user_namespaces > 0) or a setuid Apptainer with a /etc/subuid range for you; "
        f"ask the site for either, or build elsewhere and copy the image; {PROOT_NOTE}",
    )


def facts(site=None) -> Facts:
    runtime = installed_apptainer(site)
    user = _user_names()
    userns = _can_unshare()
    return Facts(
        root=os.geteuid() == 0,
        runtime=runtime,
        userns=userns,
        subids=all(_has_range(Path(f"/etc/sub{kind}"), user) for kind in ("uid", "gid")),
        setuid=_setuid_starter(runtime),
        fakeroot_command=shutil.which("fakeroot") is not None,
        toolbox_reason=toolbox.can_provision(),
        toolbox_ready=toolbox.is_ready(),
        proot=shutil.which("proot"),
        proot_builds=builds_under_proot(runtime),
        # probed only where the route may be taken: root and user namespaces need no proot
        proot_statx=os.geteuid() != 0 and not userns and translates_statx(shutil.which("proot")),
    )


def check(site=None, target=None) -> Route:
    """The route, or one line (exit status 2) before anything is written when there is none,
    or when ``target`` (a name, with ``site_image`` its recipe's) cannot take it."""
    route = decide(facts(site))
    if route.name is None:
        raise SetupError(route.blocker)
    if route.name in ("proot", "unpacked") and target is not None and not target.site_image:
        raise SetupError(
            f"{target.name}: this host builds only under proot (no user namespaces, no fakeroot), which "
            "builds from an image: a target on a site's own image (site_image in its recipe, as lumi-laif) "
            f"builds here; {target.name} starts from a Debian root, which needs root or --fakeroot; build "
            "it on another host and copy the image"
        )
    return route


def _user_names() -> set:
    uid = os.getuid()
    try:
        return {str(uid), pwd.getpwuid(uid).pw_name}
    except KeyError:
        return {str(uid)}


def _has_range(path: Path, names: set) -> bool:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return False
    return any(line.split(":")[0] in names and line.count(":") == 2 for line in lines)


def _can_unshare() -> bool:
    """Whether a user namespace can be made here: tried, as kernel settings, AppArmor and
    seccomp all have a say."""
    if shutil.which("unshare") is None:
        return _number("/proc/sys/user/max_user_namespaces") > 0
    try:
        return runner.run(["unshare", "--user", "--map-root-user", "true"], check=False, timeout=10).returncode == 0
    except ToolError:
        return False


def _number(path) -> int:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return 0


def builds_under_proot(runtime) -> bool:
    """SingularityCE 3.11 and later build as an ordinary user under proot; Apptainer does not."""
    if runtime is None:
        return False
    try:
        said = runner.run([runtime, "--version"], check=False, timeout=60).stdout
    except ToolError:
        return False
    found = SINGULARITYCE_VERSION.search(said or "")
    return bool(found) and tuple(map(int, found.groups())) >= PROOT_BUILDS_FROM


def translates_statx(proot) -> bool:
    """Whether ``proot`` maps the path of a statx call (proot 5.2 and later; with its seccomp
    acceleration off where that skips calls, proot_settings)."""
    return proot_settings(proot) is not None


@functools.lru_cache(maxsize=8)  # asked by the route, the build and the SBOM: probed once
def proot_settings(proot):
    """The environment under which ``proot`` translates statx: {} as it is, or its seccomp
    acceleration off (Debian's proot 5.4 on a 6.x kernel then misses even openat); None when
    neither does (proot 5.1). Probed with a folder bound at a path this host lacks: a file in
    it must be found by statx, called through libc in this Python."""
    if proot is None:
        return None
    with tempfile.TemporaryDirectory(prefix="hpcml-proot-") as folder:
        (Path(folder) / "probe").touch()
        probe = "import ctypes; libc = ctypes.CDLL(None); buffer = ctypes.create_string_buffer(512); "
        probe += f"raise SystemExit(libc.statx(-100, b'{STATX_PROBE}/probe', 0, 0x7ff, buffer))"
        argv = [proot, "-b", f"{folder}:{STATX_PROBE}", sys.executable, "-I", "-c", probe]
        for settings in ({}, {NO_SECCOMP: "1"}):
            try:
                if runner.run(argv, check=False, timeout=60, env=dict(os.environ, **settings)).returncode == 0:
                    return settings
            except ToolError:
                pass
    return None


def _setuid_starter(runtime) -> bool:
    if runtime is None:
        return False
    prefix = Path(runtime).resolve().parent.parent
    # libexec/ where built from source, lib/<triplet>/ in Debian's package
    for starter in [*prefix.glob("libexec/*/bin/starter-suid"), *prefix.glob("lib/*/*/bin/starter-suid")]:
        if starter.stat().st_mode & 0o4000 and starter.stat().st_uid == 0:
            return True
    return False
