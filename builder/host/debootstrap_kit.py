"""debootstrap for hosts that have none (issue 51): a RHEL or SLES login node, or a user
without apt. Debian's own debootstrap is a shell script; the builder fetches the pinned
package and the archive keyring from the Debian mirror, checks their sha256, unpacks them
under the user's cache and puts a `debootstrap` command first on Apptainer's PATH (whose
debootstrap agent, and the %setup of an image of another architecture, look it up there).

What the script itself needs from the host: sh, wget, perl, tar, and ar or dpkg-deb; gpgv
or sqv checks the archive's signature (without either, debootstrap warns and goes on, and
the image's own apt checks every later download). `missing_tools` names what is absent.

Example: kit_bin(mirror, progress) -> ~/.cache/hpc-ml-containers/debootstrap/1.0.141/bin
"""

import hashlib
import io
import os
import re
import shutil
from pathlib import Path

from ..errors import ToolError
from ..fileio import write_atomic
from . import hostinfo
from .cache import cache_dir
from .http_get import open_url

# trixie's debootstrap, the one the toolbox installs, so that both routes make the same
# minbase root; and the keyring that signs bookworm and trixie (checked 2026-11-28 against
# the mirror's dists/trixie/main/binary-all/Packages)
VERSION = "1.0.141"
PACKAGES = {
    "debootstrap": (
        f"pool/main/d/debootstrap/debootstrap_{VERSION}_all.deb",
        "8c02cb8ad712eb67afb0d23fab175c562804cc97eda70b70cb0f3bc2a21732d7",
    ),
    "debian-archive-keyring": (
        "pool/main/d/debian-archive-keyring/debian-archive-keyring_2025.1_all.deb",
        "9ea7778e443144ca490668737a8ab22dd3e748bb99e805e22ec055abeb3c7fac",
    ),
}
WANTED = ("usr/sbin/debootstrap", "usr/share/debootstrap/", "usr/share/keyrings/")
NEEDED = (("wget",), ("perl",), ("tar",), ("ar", "dpkg-deb"))  # each: one of these
TIMEOUT_S = 120
MARKER = "--- debootstrap"  # the wrapper's first line in a build log

WRAPPER = f"""#!/bin/sh
# debootstrap {VERSION} from Debian's archive, unpacked by hpc-ml-containers for a host that has none
here=$(dirname "$(dirname "$(readlink -f "$0")")")
echo "{MARKER} {VERSION} from the builder's cache (the host has none)" >&2
DEBOOTSTRAP_DIR="$here/usr/share/debootstrap"
# a user's PATH often lacks the sbin folders, where chroot lives
PATH="$PATH:/usr/sbin:/sbin"
export DEBOOTSTRAP_DIR PATH
keyring="$here/usr/share/keyrings/debian-archive-keyring.gpg"
if command -v gpgv >/dev/null 2>&1 || command -v sqv >/dev/null 2>&1; then
    exec "$here/usr/sbin/debootstrap" --keyring="$keyring" "$@"
fi
exec "$here/usr/sbin/debootstrap" "$@"
"""


def home() -> Path:
    return cache_dir() / "debootstrap" / VERSION


def needed_by(definition: str) -> bool:
    """Whether a layer's definition runs debootstrap: Apptainer's agent, or its own %setup."""
    return re.search(r"^Bootstrap: debootstrap$|^debootstrap ", definition, re.M) is not None


def missing_tools(which=None) -> list:
    """What debootstrap needs that the host lacks, as 'wget' or 'ar or dpkg-deb'."""
    which = which or shutil.which
    return [" or ".join(names) for names in NEEDED if not any(which(name) for name in names)]


def search_path(definition: str, progress, env_path=None, mirror=None) -> str | None:
    """The PATH for an `apptainer build` of ``definition``: None when it needs no debootstrap
    or the host has one; else the kit's bin folder first (fetched once, from ``mirror``: the
    build's, a source bundle's when it builds from one)."""
    env_path = os.environ.get("PATH", "") if env_path is None else env_path
    if not needed_by(definition) or host_debootstrap(env_path):
        return None
    return f"{kit_bin(progress, mirror)}{os.pathsep}{env_path}"


def host_debootstrap(env_path=None):
    """The host's own debootstrap on ``env_path`` (default: PATH) or in /usr/sbin, or None."""
    return shutil.which("debootstrap", path=env_path) or shutil.which("debootstrap", path="/usr/sbin")


def kit_bin(progress, mirror=None) -> Path:
    """The kit's bin folder, holding `debootstrap`; fetched and unpacked on first use."""
    missing = missing_tools()
    if missing:
        raise ToolError(
            f"this host has no debootstrap, and the builder's own needs {', '.join(missing)} "
            "on PATH; install them, or debootstrap itself, and retry"
        )
    box = home()
    if (box / "usr" / "sbin" / "debootstrap").is_file():
        _write_command(box)  # a kit unpacked by an older builder gains what the command learned since
        return box / "bin"
    mirror = (mirror or hostinfo.debian_mirror()).rstrip("/")
    progress.step(f"this host has no debootstrap: fetching Debian's {VERSION} into {box}")
    staging = box.with_name(f"{box.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for name, (path, sha256) in PACKAGES.items():
            unpack(fetch_pinned(f"{mirror}/{path}", sha256, name), staging)
        _write_command(staging)
        shutil.rmtree(box, ignore_errors=True)
        staging.rename(box)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return box / "bin"


def _write_command(box: Path):
    command = box / "bin" / "debootstrap"
    if write_atomic(command, WRAPPER) or command.stat().st_mode & 0o777 != 0o755:
        command.chmod(0o755)


def fetch_pinned(url, sha256, name, pinned_in=__name__) -> bytes:
    """The bytes at ``url``, whose sha256 must be ``sha256`` (pinned in module ``pinned_in``)."""
    cafile = hostinfo.pip_settings()["cert"] if url.startswith("https:") else None
    try:
        with open_url(url, timeout=TIMEOUT_S, cafile=cafile) as response:
            data = response.read()
    except (OSError, ValueError) as error:
        raise ToolError(f"cannot fetch {name} from {url}: {error}") from None
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise ToolError(f"{url}: sha256 {got}, expected {sha256} (pinned in {pinned_in.replace('.', '/')}.py)")
    return data


def unpack(deb: bytes, dest: Path):
    """Extract a .deb's files under WANTED into ``dest``, with Python alone: a .deb is an ar
    archive whose data.tar.* holds the files (no dpkg-deb or ar on the host needed)."""
    import tarfile  # here, not at a command's start: only the first use of the kit unpacks

    with _tar_member(deb, "data.tar") as archive:
        chosen = [m for m in archive.getmembers() if m.name.removeprefix("./").startswith(WANTED)]
        # the pinned sha256 vouches for the contents; the data filter (3.11.4+) guards the paths too
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(dest, members=chosen, **safe)


def control(deb: bytes) -> dict:
    """The fields of a .deb's control file ({"Package": "apptainer", "Depends": "...", ...}),
    a continuation line kept in its field's value."""
    import email.parser

    with _tar_member(deb, "control.tar") as archive:
        member = next((m for m in archive.getmembers() if m.name.removeprefix("./") == "control"), None)
        text = archive.extractfile(member).read().decode("utf-8", "replace") if member else ""
    return dict(email.parser.HeaderParser().parsestr(text).items())


def _tar_member(deb: bytes, prefix: str):
    """The .deb's member ``prefix``.* (data.tar.xz, control.tar.zst...) opened as a tar archive."""
    import tarfile  # here, not at a command's start: only the kit's first use and bundles read .debs

    members = dict(_ar_members(deb))
    packed = next((body for name, body in members.items() if name.startswith(prefix)), None)
    if packed is None:
        raise ToolError(f"not a Debian package: no {prefix} among {sorted(members)}")
    return tarfile.open(fileobj=io.BytesIO(packed), mode="r:*")


def _ar_members(data: bytes):
    """(name, body) of each member of an ar archive (60-byte headers, bodies padded to even)."""
    if not data.startswith(b"!<arch>\n"):
        raise ToolError("not a Debian package: no ar header")
    offset = 8
    while offset + 60 <= len(data):
        header = data[offset : offset + 60]
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip() or 0)
        yield name, data[offset + 60 : offset + 60 + size]
        offset += 60 + size + (size % 2)
