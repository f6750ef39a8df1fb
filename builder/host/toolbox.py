"""An Apptainer for hosts that have none: a Debian trixie root under the user's cache with
Apptainer from sid (its .deb taken from the archive's pool by its pinned sha256), entered
through a mount namespace (see builder/host/toolbox-enter.sh). Made from the host's Debian
mirror, or from a source bundle's copy (bundle/toolbox_part.py) where no network answers.

Provisioned once, reused, rebuilt when broken, removed with `python -m builder toolbox remove`.
"""

import contextlib
import json
import os
import platform
import re
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from .. import contract, runner
from ..errors import ToolError
from ..fileio import sha256_file, write_atomic
from . import debootstrap_kit, hostinfo
from .cache import cache_dir
from .debian_resolve import DEBIAN_ARCH

SUITE = "trixie"  # Apptainer needs glibc >= 2.38; bookworm has 2.36
# The toolbox's Apptainer, pinned by version and by the sha256 of its .deb for each host
# architecture (checked 2026-12-02 against the mirror's dists/sid/main/binary-*/Packages):
# it is no part of an image, but it is what writes the image's files, so a new Apptainer in
# sid must not change a rebuild unseen. Raise the pin on purpose, with both hashes.
APPTAINER_VERSION = "1.4.5-2"
APPTAINER_SHA256 = {
    "x86_64": "26cf96e08fccb0e50ea0f285a5a19f940ee873d167a0680584fe6eba7d197d65",
    "aarch64": "77c6645e6a51630fd9ce61faab09e415b02d0073bd62e1e029ca21e2a422aff6",
}
STAMP = "READY"
INCLUDED = ("ca-certificates",)  # debootstrap's --include
INSTALLED = ("debootstrap", "squashfs-tools")  # beside Apptainer, from the suite


def home() -> Path:
    return cache_dir() / "toolbox"


def command() -> Path:
    """The toolbox's apptainer; its scripts are brought up to this builder's first, so an old
    toolbox gains what the enter script learned since (the wrapper uses it as it is)."""
    if (home() / STAMP).is_file():
        _install_scripts(home())
    return home() / "bin" / "apptainer"


def is_ready() -> bool:
    box = home()
    return (box / STAMP).is_file() and (box / "root" / "usr" / "bin" / "apptainer").is_file()


def version():
    return runner.run([str(command()), "--version"], timeout=60).stdout.strip()


def can_provision():
    """Why a toolbox cannot be made here, or None when it can."""
    if os.uname().sysname != "Linux":
        return "a toolbox needs Linux"
    if os.geteuid() != 0:
        return "a toolbox needs root (mount namespaces and pivot_root)"
    if shutil.which("unshare") is None:
        return "a toolbox needs unshare (util-linux)"
    return None


# Docker's default set plus DAC_READ_SEARCH: what unpacking an image (chown, setuid bits,
# device nodes, file capabilities) needs, and all of it within any host's bounding set.
ROOT_CAPABILITIES = (
    "CAP_AUDIT_WRITE",
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_MKNOD",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_RAW",
    "CAP_SETFCAP",
    "CAP_SETGID",
    "CAP_SETPCAP",
    "CAP_SETUID",
    "CAP_SYS_CHROOT",
)


def configure(root: Path):
    """Root in a container asks for every capability by default, and a host whose bounding
    set lacks one (CAP_SYS_RESOURCE here) then refuses `apptainer exec`, including the one
    that unpacks a `Bootstrap: localimage` base. `file` grants root the set recorded in
    capability.json instead; Apptainer 1.4 applies it under --fakeroot too."""
    etc = root / "etc" / "apptainer"
    conf = etc / "apptainer.conf"
    text = conf.read_text()
    fixed = re.sub(r"^root default capabilities = .*$", "root default capabilities = file", text, flags=re.M)
    if fixed != text:
        conf.write_text(fixed)
    wanted = json.dumps({"users": {"root": list(ROOT_CAPABILITIES)}, "groups": {}})
    capabilities = etc / "capability.json"
    if not capabilities.is_file() or capabilities.read_text() != wanted:
        capabilities.write_text(wanted)


def ensure(progress, log_dir: Path, mirror=None) -> Path:
    """The toolbox's apptainer command, provisioning or repairing the toolbox first, from
    ``mirror`` (default: the host's Debian mirror; a source bundle's, served, in a build from one)."""
    if is_ready():
        try:
            _install_scripts(home())  # keep the entry scripts in step with the builder
            configure(home() / "root")
            version()
            return command()
        except ToolError:
            progress.step("toolbox is broken; rebuilding it")
    reason = can_provision()
    if reason:
        raise ToolError(
            f"no apptainer or singularity on PATH and {reason}; install Apptainer "
            "(https://apptainer.org/docs/admin/main/installation.html) and retry"
        )
    provision(progress, log_dir, mirror)
    return command()


def provision(progress, log_dir: Path, mirror=None):
    box = home()
    for stale in box.parent.glob("toolbox.tmp-*"):  # left by a killed provision
        _remove_tree(stale)
    staging = box.with_name(f"toolbox.tmp-{os.getpid()}")
    try:
        _provision_into(staging, progress, log_dir, mirror)
    except BaseException:
        _remove_tree(staging)
        raise
    old = box.with_name(f"toolbox.old-{os.getpid()}")
    if box.exists():
        box.rename(old)
    staging.rename(box)
    _remove_tree(old)
    progress.step(f"toolbox ready: {version()}")


def _provision_into(staging, progress, log_dir, mirror=None):
    root = staging / "root"
    mirror = (mirror or hostinfo.debian_mirror()).rstrip("/")
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / "toolbox.log"
    log.write_text("")
    # the host's debootstrap, or Debian's fetched into the cache: no apt-get on the host
    debootstrap = debootstrap_kit.host_debootstrap() or str(debootstrap_kit.kit_bin(progress, mirror) / "debootstrap")
    progress.step(f"toolbox: debootstrap {SUITE} (log: {log})")
    with _without_spaces(root) as target:
        runner.run_logged(
            [debootstrap, "--variant=minbase", f"--include={','.join(INCLUDED)}", SUITE, str(target), mirror],
            log,
            what="debootstrap",
        )
    _install_scripts(staging)
    enter = str(staging / "bin" / "enter")
    machine = platform.machine()
    progress.step(f"toolbox: fetching apptainer {APPTAINER_VERSION} (sha256-pinned)")
    deb = _apptainer_deb(mirror, machine)
    archives = root / "var" / "cache" / "apt" / "archives"
    (archives / Path(apptainer_pool_path(machine)).name).write_bytes(deb)
    check_apptainer_deb(archives, machine)
    progress.step("toolbox: installing apptainer")
    runner.run_logged([enter, "/usr/bin/apt-get", "update"], log, what="apt-get update")
    runner.run_logged(
        [
            enter,
            "/bin/sh",
            "-c",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
            f"/var/cache/apt/archives/apptainer_*.deb {' '.join(INSTALLED)} "
            "&& apt-get clean",
        ],
        log,
        what="installing apptainer",
    )
    configure(root)
    # --fakeroot maps root onto these ranges
    for name in ("subuid", "subgid"):
        (root / "etc" / name).write_text("root:100000:65536\n")
    (staging / STAMP).write_text(f"suite {SUITE}\n")


@contextlib.contextmanager
def _without_spaces(root: Path):
    """``root``, or where its path has a space (a cache under "My Files"), a link to it from a
    temporary folder: debootstrap's scripts split the target's path at spaces."""
    if " " not in str(root):
        yield root
        return
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="hpcml-toolbox-", dir="/tmp"))
    try:
        (folder / "root").symlink_to(root)
        yield folder / "root"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def debian_arch(machine: str) -> str:
    """The Debian architecture of a toolbox for host ``machine`` (uname -m)."""
    if machine not in DEBIAN_ARCH or machine not in APPTAINER_SHA256:
        raise ToolError(f"no toolbox for {machine}: it is made for {', '.join(APPTAINER_SHA256)} hosts")
    return DEBIAN_ARCH[machine]


def apptainer_pool_path(machine: str) -> str:
    """Where Debian's archive keeps the pinned Apptainer for host architecture ``machine``."""
    return f"pool/main/a/apptainer/apptainer_{APPTAINER_VERSION}_{debian_arch(machine)}.deb"


def _apptainer_deb(mirror: str, machine: str) -> bytes:
    """The pinned .deb from ``mirror``'s pool (sid's, which the archive shares with every suite),
    checked against its pin: no index is read, so sid's need not be current or signed now."""
    url = f"{mirror}/{apptainer_pool_path(machine)}"
    try:
        return debootstrap_kit.fetch_pinned(url, APPTAINER_SHA256[machine], "apptainer", pinned_in=__name__)
    except ToolError as error:
        raise ToolError(
            f"{error}; the toolbox's Apptainer is pinned to {APPTAINER_VERSION} (builder/host/toolbox.py): "
            f"if {mirror} no longer has it, set {contract.MIRROR} to a snapshot archive that does, "
            "or build from a source bundle that holds it (hpcml bundle)"
        ) from None


def check_apptainer_deb(archives: Path, arch: str) -> None:
    """The one apptainer .deb in ``archives`` is the pinned version with the pinned sha256
    for host architecture ``arch`` (uname -m); else a one-line ToolError naming the file."""
    found = sorted(archives.glob("apptainer_*.deb"))
    if len(found) != 1:
        raise ToolError(f"{archives}: expected one apptainer .deb, found {len(found)}")
    wanted = APPTAINER_SHA256.get(arch)
    if wanted is None:
        raise ToolError(f"the toolbox's Apptainer has no pinned sha256 for {arch} (builder/host/toolbox.py)")
    got = sha256_file(found[0])
    if got != wanted:
        raise ToolError(
            f"{found[0]}: sha256 {got}, not the pinned {wanted} of apptainer {APPTAINER_VERSION} for {arch}; "
            "the mirror served other bytes: try again, or another mirror"
        )


def _install_scripts(staging):
    bin_dir = staging / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    scripts = {
        "enter": resources.files(__package__).joinpath("toolbox-enter.sh").read_text(),
        "apptainer": "#!/bin/sh\n# Apptainer from the toolbox, usable like an installed "
        'command.\nexec "$(dirname "$(readlink -f "$0")")/enter" '
        '/usr/bin/apptainer "$@"\n',
    }
    for name, text in scripts.items():
        if write_atomic(bin_dir / name, text) or (bin_dir / name).stat().st_mode & 0o777 != 0o755:
            (bin_dir / name).chmod(0o755)


def remove():
    _remove_tree(home())


def _remove_tree(path):
    """Remove a toolbox tree; a build killed mid-way can leave bind mounts, so unmount first."""
    if not path.exists():
        return
    mounts = [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(str(path) + "/")
    ]
    for mount in sorted(mounts, reverse=True):
        runner.run(["umount", "-l", mount], check=False)
    shutil.rmtree(path, ignore_errors=True)
