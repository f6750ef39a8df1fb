"""The toolbox's half of a bundle: what root needs to make the builder's Apptainer toolbox
(host/toolbox.py) on a host with no Apptainer and no network. For the architecture of the
host that makes the bundle:

    toolbox/debian-trixie-amd64.txt            the toolbox root's packages, resolved when the
                                               bundle is made (a lock of the bundle's own)
    debian/dists/trixie/...                    trixie's signed InRelease and main index
    debian/pool/main/...                       each of those .debs, and the pinned Apptainer's

The toolbox is no part of an image, so the repository holds no lock of it: trixie moves on,
and a toolbox made from today's trixie writes the same image files (its Apptainer is pinned).
What the bundle holds is fixed when it is made, and a build from it checks each file.

Example: files = make(Path("bundles/cpu"), "http://MIRROR/debian", progress)
         check(Path("bundles/cpu"), files)  # offline, before a build provisions from it
         provision(Path("bundles/cpu"), progress, log_dir)  # `hpcml toolbox provision --bundle DIR`
"""

import platform
import re
from pathlib import Path

from ..errors import ToolError
from ..fileio import sha256_file, write_atomic
from ..host import debian_resolve, debootstrap_kit, toolbox
from ..lockfile import DebianLock, read_debian
from . import debian_part, fetched, manifest, serve

FOLDER = "toolbox"
STAGE = "toolbox"
COMPONENTS = ("main",)
# a Depends entry: its first alternative's name, without version or architecture qualifiers
DEPENDS_NAME = re.compile(r"\s*([a-z0-9][a-z0-9+.-]+)")


def lock_path(machine: str) -> str:
    return f"{FOLDER}/debian-{toolbox.SUITE}-{toolbox.debian_arch(machine)}.txt"


def apptainer_path(machine: str) -> str:
    return f"debian/{toolbox.apptainer_pool_path(machine)}"


def make(out: Path, mirror: str, progress, machine=None) -> dict:
    """Fetch and check the toolbox's files for ``machine`` (default: this host's) into
    ``out`` from ``mirror``; returns {path in the bundle: sha256}."""
    machine = machine or platform.machine()
    mirror = mirror.rstrip("/")
    deb = apptainer_path(machine)
    fetched.fetch(f"{mirror}/{toolbox.apptainer_pool_path(machine)}", out / deb, toolbox.APPTAINER_SHA256[machine])
    asked = (*toolbox.INCLUDED, *toolbox.INSTALLED, *depends((out / deb).read_bytes()))
    asked = tuple(sorted(dict.fromkeys(asked)))
    packages = debian_resolve.resolve(toolbox.SUITE, toolbox.debian_arch(machine), mirror, asked, components=COMPONENTS)
    lock = DebianLock(STAGE, toolbox.SUITE, toolbox.debian_arch(machine), COMPONENTS, asked, packages)
    files = debian_part.fetch_indexes([lock], mirror, out)
    files.update(debian_part.fetch_debs([lock], mirror, out))
    write_atomic(out / lock_path(machine), _text(lock))
    progress.step(f"the toolbox ({machine}): {toolbox.SUITE} with {len(packages)} packages, and Apptainer")
    return files | {lock_path(machine): sha256_file(out / lock_path(machine)), deb: toolbox.APPTAINER_SHA256[machine]}


def depends(deb: bytes) -> tuple:
    """The package names a .deb's Depends and Pre-Depends name (each entry's first choice)."""
    fields = debootstrap_kit.control(deb)
    entries = ",".join(filter(None, (fields.get("Pre-Depends"), fields.get("Depends")))).split(",")
    return tuple(match[1] for entry in entries if (match := DEPENDS_NAME.match(entry.split("|")[0])))


def holds(files: dict, machine=None) -> bool:
    """Whether a bundle's files ({path: sha256}) hold a toolbox for ``machine``."""
    return lock_path(machine or platform.machine()) in files


def check(bundle: Path, files: dict, machine=None) -> None:
    """With no network: the toolbox's lock, indexes, .debs and pinned Apptainer are in the
    bundle as listed ({path: sha256}, read back); nothing to check when it holds none."""
    machine = machine or platform.machine()
    if not holds(files, machine):
        return
    lock = read_debian(bundle / lock_path(machine), STAGE)
    debian_part.check_against_locks([lock], bundle, files)
    if files.get(apptainer_path(machine)) != toolbox.APPTAINER_SHA256[machine]:
        raise ToolError(
            f"{bundle}/{apptainer_path(machine)}: not in the bundle with the sha256 pinned in "
            "builder/host/toolbox.py; make the bundle again with: hpcml bundle TARGET"
        )


def provision(bundle: Path, progress, log_dir: Path) -> None:
    """Make (or make again) the toolbox from the bundle alone, served on loopback."""
    manifest.require(bundle, f"hpcml bundle TARGET --out {bundle}")
    files = manifest.check(bundle)
    if not holds(files):
        raise ToolError(
            f"{bundle}: holds no Apptainer toolbox for {platform.machine()}; "
            "make the bundle again with this builder on such a host"
        )
    check(bundle, files)
    with serve.serving(bundle, files, root=bundle) as url:
        toolbox.provision(progress, log_dir, f"{url}/debian")


def _text(lock: DebianLock) -> str:
    lines = lock.text("the toolbox", "hpcml bundle").splitlines(keepends=True)
    head = [
        "# The builder's Apptainer toolbox: its Debian root, resolved by `hpcml bundle` when the bundle was made.\n",
        "# The packages a minbase debootstrap and the apt-get install beside Apptainer give it.\n",
    ]
    return "".join(head + lines[2:])
