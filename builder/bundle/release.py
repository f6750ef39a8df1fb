"""A suite's Release files as a bundle keeps them: fetched from the mirror, checked with gpgv
and Debian's keyring as apt checks them (one good signature by a key of the keyring, no bad
one; a file: mirror, a test's, may be unsigned), and read for the sha256 of each index.

Example: text = fetch_release("http://MIRROR/debian", "bookworm", "debian", bundle, written)
         sums(text)["main/binary-amd64/Packages.xz"] -> "5f1e..."
"""

import hashlib
import re
import tempfile
from pathlib import Path

from .. import runner
from ..errors import ToolError
from ..fileio import write_bytes_atomic
from ..host.debian_resolve import KEYRING
from . import fetched

RELEASE_FILES = ("InRelease", "Release", "Release.gpg")
GPGV_TIMEOUT_S = 60


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


def verify(got: dict, where) -> None:
    """InRelease (and Release.gpg, when in ``got``) signed with a key of the keyring, and the
    InRelease saying what Release does; else a ToolError naming the file under ``where``."""
    if not KEYRING.is_file():
        raise ToolError(f"{KEYRING} is missing, so {where}/InRelease cannot be checked; install debian-archive-keyring")
    with tempfile.TemporaryDirectory(prefix="hpcml-release-") as tmp:
        for name, data in got.items():
            Path(tmp, name).write_bytes(data)
        body = Path(tmp, "InRelease.body")
        _gpgv(["--output", str(body), str(Path(tmp, "InRelease"))], f"{where}/InRelease")
        if "Release.gpg" in got and not _passes(_gpgv_run([str(Path(tmp, "Release.gpg")), str(Path(tmp, "Release"))])):
            del got["Release.gpg"]  # stale beside a good InRelease (a lagging mirror): apt reads InRelease
        if body.read_bytes() != got["Release"]:
            raise ToolError(
                f"{where}/Release: not what its InRelease says (the mirror changed while it was read); try again"
            )


def _gpgv(args, what) -> None:
    result = _gpgv_run(args)
    if not _passes(result):
        last = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise ToolError(f"{what}: no good signature by a key of {KEYRING} ({last})")


def _gpgv_run(args):
    argv = ["gpgv", "--status-fd", "1", "--keyring", str(KEYRING), *args]
    return runner.run(argv, check=False, timeout=GPGV_TIMEOUT_S)


def _passes(result) -> bool:
    # apt's rule: one good signature of a key in the keyring, and no bad one; a signature by a
    # key the keyring lacks (a newer release's) is passed over
    status = re.findall(r"^\[GNUPG:\] (\w+)", result.stdout, re.M)
    return "GOODSIG" in status and "BADSIG" not in status


def sums(release: str) -> dict:
    """{path: sha256} of a Release file's SHA256 section."""
    sums, inside = {}, False
    for line in release.splitlines():
        if not line.startswith(" "):
            inside = line.rstrip() == "SHA256:"
        elif inside and len(fields := line.split()) == 3:
            sums[fields[2]] = fields[0]
    return sums
