"""A suite's Release files as a bundle keeps them: fetched from the mirror, checked with gpgv
(or sqv) and Debian's keyring as apt checks them (one good signature by a key of the keyring, no bad
one; a file: mirror, a test's, may be unsigned), and read for the sha256 of each index.

Example: text = fetch_release("http://MIRROR/debian", "bookworm", "debian", bundle, written)
         sums(text)["main/binary-amd64/Packages.xz"] -> "5f1e..."
"""

import contextlib
import hashlib
import re
import shutil
import tempfile
from pathlib import Path

from .. import runner
from ..errors import ToolError
from ..fileio import write_bytes_atomic
from ..host import debootstrap_kit
from ..host.debian_resolve import KEYRING
from . import fetched

RELEASE_FILES = ("InRelease", "Release", "Release.gpg")
TIMEOUT_S = 60  # for one signature check
IN_KEYRING_DEB = "usr/share/keyrings/debian-archive-keyring.gpg"  # the keyring's path in its .deb


def fetch_release(mirror: str, suite: str, top: str, bundle: Path, written: dict) -> str:
    """Fetch, check and write the suite's Release files; the Release's text."""
    base = f"{mirror}/dists/{suite}"
    signed = not mirror.startswith("file:")
    got = {}
    for name in RELEASE_FILES:
        try:
            got[name] = fetched.fetch_bytes(f"{base}/{name}")
        except ToolError:
            if signed or name == "Release":
                raise
    if signed:
        verify(got, base)
    for name, data in got.items():
        relpath = f"{top}/dists/{suite}/{name}"
        write_bytes_atomic(bundle / relpath, data)
        written[relpath] = hashlib.sha256(data).hexdigest()
    return got["Release"].decode("utf-8", errors="replace")


@contextlib.contextmanager
def trusted_keyring(bundle: Path, files: dict):
    """The host's Debian keyring; where it has none (a RHEL login node), the one in the bundle's
    debian-archive-keyring .deb, when its sha256 (``files``: the bundle's, read back) is the one
    the builder pins for its own debootstrap (host/debootstrap_kit.py)."""
    path, sha256 = debootstrap_kit.PACKAGES["debian-archive-keyring"]
    if KEYRING.is_file() or files.get(f"debian/{path}") != sha256:
        yield KEYRING
        return
    with tempfile.TemporaryDirectory(prefix="hpcml-keyring-") as tmp:
        debootstrap_kit.unpack((bundle / "debian" / path).read_bytes(), Path(tmp))
        yield Path(tmp, IN_KEYRING_DEB)


def verify(got: dict, where, keyring: Path = None) -> None:
    """InRelease (and Release.gpg, when in ``got``) signed with a key of ``keyring`` (default:
    the host's Debian keyring), and the InRelease saying what Release does; else a ToolError
    naming the file under ``where``. gpgv checks them, or sqv where there is no gpgv (Debian
    13's apt has only sqv)."""
    keyring = keyring or KEYRING
    if not keyring.is_file():
        raise ToolError(f"{keyring} is missing, so {where}/InRelease cannot be checked; install debian-archive-keyring")
    tool = next((name for name in ("gpgv", "sqv") if shutil.which(name)), None)
    if tool is None:
        raise ToolError(f"neither gpgv nor sqv is on PATH to check {where}/InRelease; install either (gnupg2's gpgv)")
    with tempfile.TemporaryDirectory(prefix="hpcml-release-") as tmp:
        for name, data in got.items():
            Path(tmp, name).write_bytes(data)
        body = Path(tmp, "InRelease.body")
        if not CHECKS[tool](keyring, Path(tmp, "InRelease"), body):
            raise ToolError(f"{where}/InRelease: no good signature by a key of {keyring} ({tool})")
        if "Release.gpg" in got and not CHECKS[tool](keyring, Path(tmp, "Release"), None, Path(tmp, "Release.gpg")):
            del got["Release.gpg"]  # stale beside a good InRelease (a lagging mirror): apt reads InRelease
        # sqv leaves out the line end before the signature, which belongs to the text
        if body.read_bytes() not in (got["Release"], got["Release"].removesuffix(b"\n")):
            raise ToolError(
                f"{where}/Release: not what its InRelease says (the mirror changed while it was read); try again"
            )


def _gpgv(keyring: Path, signed: Path, body, signature=None) -> bool:
    """apt's rule: one good signature of a key in the keyring, and no bad one; a signature by a
    key the keyring lacks (a newer release's) is passed over."""
    files = [str(signature), str(signed)] if signature else ["--output", str(body), str(signed)]
    result = runner.run(["gpgv", "--status-fd", "1", "--keyring", str(keyring), *files], check=False, timeout=TIMEOUT_S)
    status = re.findall(r"^\[GNUPG:\] (\w+)", result.stdout, re.M)
    return "GOODSIG" in status and "BADSIG" not in status


def _sqv(keyring: Path, signed: Path, body, signature=None) -> bool:
    """sqv's rule: one valid signature by a certificate of the keyring."""
    if signature:
        files = ["--signature-file", str(signature), str(signed)]
    else:
        files = ["--cleartext", str(signed), "--output", str(body)]
    return runner.run(["sqv", "--keyring", str(keyring), *files], check=False, timeout=TIMEOUT_S).returncode == 0


CHECKS = {"gpgv": _gpgv, "sqv": _sqv}


def sums(release: str) -> dict:
    """{path: sha256} of a Release file's SHA256 section."""
    sums, inside = {}, False
    for line in release.splitlines():
        if not line.startswith(" "):
            inside = line.rstrip() == "SHA256:"
        elif inside and len(fields := line.split()) == 3:
            sums[fields[2]] = fields[0]
    return sums
