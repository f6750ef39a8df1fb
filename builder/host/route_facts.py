"""What this host offers a build, read once before it writes anything: the facts that
host/build_route.py decides the route from (root, an installed Apptainer, user namespaces, a
/etc/subuid range, a setuid starter, the fakeroot command, a toolbox, proot and whether it
translates statx, CAP_SYS_RESOURCE). Each probe runs the real thing where asking the kernel's
settings would not do: AppArmor and seccomp have a say in user namespaces too.

Example: facts(site) -> Facts(root=True, apptainer="/usr/bin/apptainer", userns=True, ...)
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
from ..errors import ToolError
from . import toolbox
from .which_apptainer import installed_apptainer

# SingularityCE's `--version`: "singularity-ce version 4.1.3-jammy"; proot builds from 3.11
SINGULARITYCE_VERSION = re.compile(r"singularity-ce version (\d+)\.(\d+)")
PROOT_BUILDS_FROM = (3, 11)
NO_SECCOMP = "PROOT_NO_SECCOMP"  # proot's own switch: trace every call, not a seccomp-chosen few
STATX_PROBE = "/hpcml-statx-probe"  # no host has it: only proot's bind shows it
CAP_SYS_RESOURCE = 24


@dataclass(frozen=True)
class Facts:
    root: bool  # effective uid 0
    apptainer: str | None  # the installed apptainer or singularity command; None: none on PATH
    userns: bool  # this user can make a user namespace (unshare -U -r ran)
    subids: bool  # /etc/subuid and /etc/subgid give this user a range (a full ID map)
    setuid: bool  # its setuid starter is installed (it maps IDs without newuidmap)
    fakeroot_command: bool  # `fakeroot` on PATH: Apptainer's fallback for a one-ID namespace
    toolbox_reason: str | None = None  # why no toolbox can be provisioned (None: one can)
    toolbox_ready: bool = False  # one was provisioned before
    proot: str | None = None  # proot on PATH
    proot_builds: bool = False  # it builds under proot when unprivileged (SingularityCE 3.11+)
    proot_statx: bool = False  # proot translates statx's path (5.2+): an image's ls and cp see its files
    cap_sys_resource: bool = True  # in the capability bounding set: a root build's %post needs it


def facts(site=None) -> Facts:
    apptainer = installed_apptainer(site)
    user = _user_names()
    userns = _can_unshare()
    return Facts(
        root=os.geteuid() == 0,
        apptainer=apptainer,
        userns=userns,
        subids=all(_has_range(Path(f"/etc/sub{kind}"), user) for kind in ("uid", "gid")),
        setuid=_setuid_starter(apptainer),
        fakeroot_command=shutil.which("fakeroot") is not None,
        toolbox_reason=toolbox.can_provision(),
        toolbox_ready=toolbox.is_ready(),
        proot=shutil.which("proot"),
        proot_builds=builds_under_proot(apptainer),
        # probed only where the route may be taken: root and user namespaces need no proot
        proot_statx=os.geteuid() != 0 and not userns and translates_statx(shutil.which("proot")),
        cap_sys_resource=bool(_capability_bounding_set() >> CAP_SYS_RESOURCE & 1),
    )


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


def builds_under_proot(apptainer) -> bool:
    """SingularityCE 3.11 and later build as an ordinary user under proot; Apptainer does not."""
    if apptainer is None:
        return False
    try:
        said = runner.run([apptainer, "--version"], check=False, timeout=60).stdout
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


def _setuid_starter(apptainer) -> bool:
    if apptainer is None:
        return False
    prefix = Path(apptainer).resolve().parent.parent
    # libexec/ where built from source, lib/<triplet>/ in Debian's package
    for starter in [*prefix.glob("libexec/*/bin/starter-suid"), *prefix.glob("lib/*/*/bin/starter-suid")]:
        if starter.stat().st_mode & 0o4000 and starter.stat().st_uid == 0:
            return True
    return False


def _capability_bounding_set() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            return int(line.split()[1], 16)
    return 0
