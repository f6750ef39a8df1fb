"""One file of a bundle, fetched once and checked: a download goes to a temporary name beside
it and is renamed only when its sha256 is the expected one, so a bundle stopped half way holds
whole, checked files, and making it again fetches only what is missing.

Example: fetch("https://mirror/debian/pool/main/b/bash/bash_5.2.deb", Path("b/bash.deb"),
"9f2a...") -> "fetched" (or "kept" when the file was there with that sha256).
"""

import hashlib
import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import ToolError
from ..fileio import CHUNK, sha256_file
from ..host import hostinfo
from ..host.http_get import open_url

TIMEOUT_S = 120  # per read: a mirror that stops sending for two minutes is down


def fetch(url: str, dest: Path, sha256: str) -> str:
    """ "kept" when ``dest`` holds ``sha256`` already, else "fetched" from ``url`` (http, https or
    file) and checked; a ToolError names the URL and the file when the bytes differ."""
    if dest.is_file() and sha256_file(dest) == sha256:
        return "kept"
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.part")
    try:
        got = _download(url, part)
        if got != sha256:
            raise ToolError(f"{url}: served with sha256 {got}, expected {sha256} (the lock's); nothing kept")
        os.replace(part, dest)
    finally:
        part.unlink(missing_ok=True)
    return "fetched"


def fetch_bytes(url: str) -> bytes:
    """A small file (an index) whole, unchecked: its caller checks it against a signed one."""
    try:
        with _open(url) as answer:
            return answer.read()
    except (OSError, ValueError) as error:
        raise ToolError(f"{url}: could not fetch it ({_why(error)})") from None


def _download(url, part) -> str:
    digest = hashlib.sha256()
    try:
        with _open(url) as source, open(part, "wb") as out:
            while chunk := source.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
    except (OSError, ValueError) as error:
        raise ToolError(f"{url}: could not fetch it ({_why(error)}); make the bundle again to go on") from None
    return digest.hexdigest()


def _open(url: str):
    """A file: URL's file, or the answer to a GET of another URL (with the host's CA bundle)."""
    if url.startswith("file:"):
        return open(unquote(urlsplit(url).path), "rb")  # noqa: SIM115 (the caller's with closes it)
    return open_url(url, timeout=TIMEOUT_S, cafile=hostinfo.pip_settings()["cert"], purpose="bundle")


def _why(error) -> str:
    reason = getattr(error, "reason", None)
    return str(getattr(reason, "strerror", None) or reason or error) or type(error).__name__
