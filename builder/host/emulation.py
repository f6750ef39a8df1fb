"""Building an image for another CPU architecture: QEMU's user-mode emulator, registered with
the kernel's binfmt_misc, runs the image's programs while it builds (debootstrap's second
stage, %post, %test).

Debian's qemu-user-static ships /usr/lib/binfmt.d/qemu-<arch>.conf with the F flag: the
kernel opens the emulator once, at registration, so it runs inside the build's namespaces
and chroots, which do not contain it. Nothing starts systemd-binfmt on our build hosts and a
registration lasts until reboot, so a build registers it itself, idempotently, as root.

    >>> state("aarch64")   # on an x86_64 host with qemu-user-static installed
    ('can register', 'qemu-user-static is installed; a build registers it (root)')
"""

import os
import platform
from pathlib import Path

from .. import runner
from ..errors import ToolError

BINFMT = Path("/proc/sys/fs/binfmt_misc")
CONF_DIR = Path("/usr/lib/binfmt.d")
INSTALL = "apt-get install qemu-user-static"


def host_arch() -> str:
    """uname -m of this host: x86_64, aarch64."""
    return platform.machine()


def state(arch: str) -> tuple:
    """(kind, one line) for how this host runs ``arch`` programs. kind: "native", "ready"
    (registered with the F flag), "can register" or "missing"."""
    if arch == host_arch():
        return "native", f"not needed ({arch} host)"
    entry = BINFMT / f"qemu-{arch}"
    if entry.is_file():
        lines = entry.read_text().splitlines()
        fields = dict(line.split(" ", 1) for line in lines[1:] if " " in line)
        flags, enabled = fields.get("flags:", "").strip(), lines[:1] == ["enabled"]
        if enabled and "F" in flags:
            return "ready", f"registered for {arch}: {fields.get('interpreter', '?').strip()} (flags {flags})"
        return "missing", (
            f"qemu-{arch} is registered {'without the F flag' if enabled else 'but disabled'}, "
            f"so it cannot run inside the build's namespaces; remove it (echo -1 > {entry}) and build again"
        )
    if not (CONF_DIR / f"qemu-{arch}.conf").is_file():
        return "missing", f"no QEMU user-mode emulator for {arch}: {INSTALL}"
    if os.geteuid() != 0:
        return "missing", "qemu-user-static is installed but not registered, and only root can register it"
    return "can register", "qemu-user-static is installed; a build registers it (root)"


def check_build(target):
    """A build of ``target`` (an image of another architecture than this host's): its roots
    must be made for its own (debootstrap --arch), and QEMU must run its programs."""
    if target.arch == host_arch():
        return
    stages = target.stages_of_host_arch()
    if stages:
        how = ", ".join(f"{stage.bootstrap} {stage.image}" for stage in stages)
        raise ToolError(
            f"{target.name} is an {target.arch} image and its stages ({how}) start from a root of "
            f"this host's architecture ({host_arch()}); build it on an {target.arch} host"
        )
    ensure(target.arch)


def ensure(arch: str):
    """Make ``arch`` programs runnable here, or say in one line what to install or do."""
    kind, why = state(arch)
    if kind == "can register":
        _register(arch)
        kind, why = state(arch)
    if kind not in ("native", "ready"):
        raise ToolError(f"building an {arch} image on this {host_arch()} host needs QEMU user-mode emulation: {why}")


def use_newer(arch: str, interpreter: Path):
    """Register ``interpreter`` (a newer QEMU, host.cross_tools') for ``arch`` programs ahead of
    the host's: binfmt_misc takes the newest matching entry. Debian 12's QEMU 7.2 crashes in
    `import torch` of an aarch64 torch (oneDNN's CPU probe); Debian 13's QEMU 10 runs it."""
    entry = BINFMT / f"hpcml-qemu-{arch}"
    if entry.is_file():
        lines = entry.read_text().splitlines()
        if lines[:1] == ["enabled"] and f"interpreter {interpreter}" in lines:
            return
        entry.write_text("-1\n")  # another interpreter (an older cache's): replaced
    _register(arch, name=entry.name, interpreter=str(interpreter))


def _register(arch: str, name="", interpreter=""):
    """The host's qemu-user-static line for ``arch``, or that line under ``name`` for ``interpreter``."""
    if not (BINFMT / "register").exists():
        runner.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)])
    conf = CONF_DIR / f"qemu-{arch}.conf"
    line = next(line for line in conf.read_text().splitlines() if line.startswith(":"))
    if name:  # :name:type:offset:magic:mask:interpreter:flags
        fields = line.split(":")
        fields[1], fields[6] = name, interpreter
        line = ":".join(fields)
    try:
        (BINFMT / "register").write_text(line + "\n")
    except OSError as error:
        raise ToolError(f"could not register {conf} with binfmt_misc: {error.strerror}") from None
