"""Facts about the build host, read at run time so none of them is written into the repository."""

import os
import re
from functools import cache
from pathlib import Path

from .. import contract
from ..errors import ToolError
from . import pip_config


def debian_mirror() -> str:
    """The host's Debian mirror URI (HPCML_MIRROR overrides), read from its apt sources."""
    if os.environ.get(contract.MIRROR):
        return os.environ[contract.MIRROR].rstrip("/")
    for uri in _apt_source_uris():
        if uri.endswith("/debian"):
            return uri
    raise ToolError(
        f"no Debian mirror found in /etc/apt/sources.list(.d); set {contract.MIRROR} to a Debian mirror URL"
    )


def security_mirror() -> str:
    """The host's Debian security mirror URI (HPCML_SECURITY_MIRROR overrides): with
    HPCML_MIRROR set, the security archive beside that mirror (Debian's mirrors keep it as
    .../debian-security, its snapshot archive as .../archive/debian-security/TIME); else the
    host's apt sources', else the one beside the host's main mirror."""
    if os.environ.get(contract.SECURITY_MIRROR):
        return os.environ[contract.SECURITY_MIRROR].rstrip("/")
    if not os.environ.get(contract.MIRROR):
        for uri in _apt_source_uris():
            if uri.endswith("/debian-security"):
                return uri
    mirror = debian_mirror()
    beside = re.sub(r"/debian(/[^/]+)?$", r"/debian-security\1", mirror)
    if beside == mirror:
        raise ToolError(f"no Debian security mirror known beside {mirror}; set {contract.SECURITY_MIRROR} to its URL")
    return beside


def _apt_source_uris() -> list:
    """The URIs of the host's enabled deb sources, without a trailing slash, in apt's order."""
    candidates = []
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in path.read_text(errors="replace").split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
            if "deb" in fields.get("Types", "").split() and "Enabled" not in fields:
                candidates += fields.get("URIs", "").split()
    sources = Path("/etc/apt/sources.list")
    if sources.is_file():
        for line in sources.read_text(errors="replace").splitlines():
            match = re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)", line)
            if match:
                candidates.append(match.group(1))
    return [uri.rstrip("/") for uri in candidates]


def has_gpus(dev: Path = Path("/dev")) -> bool:
    """Whether this machine shows a GPU to containers: NVIDIA's device files (nvidia0, ...)
    or AMD's compute device (kfd); what the wrapper's --nv and --rocm bind."""
    return (dev / "kfd").exists() or any(re.fullmatch(r"nvidia\d+", path.name) for path in dev.glob("nvidia*"))


@cache
def pip_settings() -> dict:
    """The host pip's CA bundle, indexes and local wheel directories (config and environment).
    Read once per process: a build asks for it for every layer."""
    found = pip_config.values(("cert", "index-url", "extra-index-url", "find-links"))
    cert = found.get("cert") or "/etc/ssl/certs/ca-certificates.crt"
    return {
        "cert": cert if Path(cert).is_file() else None,
        "index_url": _web(found.get("index-url", "")),
        "extra_index_urls": [u for u in found.get("extra-index-url", "").split() if _web(u)],
        "find_links": [d for d in found.get("find-links", "").split() if Path(d).is_dir()],
    }


def _web(url):
    return url if url.startswith(("http://", "https://")) else ""
