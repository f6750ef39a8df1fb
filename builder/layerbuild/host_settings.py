"""The build host's CA bundle, pip indexes and local wheels, and this build's Debian mirrors
for apt, for %post only.

`python -m builder build` binds a folder of the host at the definition's host mount while a
layer builds; the settings file there (sourced by the build_host block) exports these. Indexes
that do not answer are left out, and named in HPCML_PIP_INDEXES_DOWN for the pip lines of the
definition's own (see host/pip_indexes.py).
"""

import shutil
import string
from pathlib import Path

from .. import contract
from ..fileio import link_or_copy
from ..host import hostinfo, pip_indexes
from ..render.parts import HOST_MOUNT, HOST_SETTINGS
from . import from_bundle

CA_VARIABLES = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
APT_SOURCES = "/etc/apt/sources.list"
_URL_CHARACTERS = frozenset(string.ascii_letters + string.digits + "._~%:/@+=-")


def write(host: Path, indexes: tuple, progress, offline=False, apt_mirrors=()):
    """The settings file and what it names, in the new folder ``host``; indexes: the web
    indexes the layer's own pip lines name (LayerPlan.pip_indexes). ``offline``: a build from a
    bundle, whose pip reads the bundle alone (from_bundle.settings_lines). ``apt_mirrors``:
    (mirror, security mirror) of this build for a Debian root's apt (apt_lines)."""
    host.mkdir()
    if offline:
        lines = [*from_bundle.settings_lines(), *apt_lines(*apt_mirrors)]
        (host / Path(HOST_SETTINGS).name).write_text("\n".join(lines) + "\n")
        return
    pip = hostinfo.pip_settings()
    down = pip_indexes.indexes_down(indexes, progress)
    lines = []
    if pip["cert"]:
        shutil.copyfile(pip["cert"], host / "ca.crt")
        lines += [f"export {var}={HOST_MOUNT}/ca.crt" for var in CA_VARIABLES]
    if pip["index_url"]:
        lines.append(f"export PIP_INDEX_URL='{pip['index_url']}'")
    extra = [url for url in pip["extra_index_urls"] if url not in down]
    if extra:
        lines.append(f"export PIP_EXTRA_INDEX_URL='{' '.join(extra)}'")
    if down:
        lines.append(f"export {contract.PIP_INDEXES_DOWN}='{' '.join(down)}'")
    if pip["find_links"]:
        wheels = host / "wheels"
        wheels.mkdir()
        for directory in pip["find_links"]:
            for wheel in Path(directory).glob("*.whl"):
                link_or_copy(wheel, wheels / wheel.name)
        lines.append(f"export PIP_FIND_LINKS={HOST_MOUNT}/wheels")
    lines += apt_lines(*apt_mirrors)
    (host / Path(HOST_SETTINGS).name).write_text("\n".join(lines) + "\n")


def apt_lines(mirror="", security="", sources=APT_SOURCES) -> list:
    """A line that points apt's `deb` lines at this build's mirrors: a lower layer built by an
    earlier build names that build's (a bundle's loopback port is gone by now). Security lines
    take ``security``, the others ``mirror``; commented lines (a shipped image's) stay. Nothing
    for a URL that is not plain (it lands in a sed expression) or when there is no mirror."""
    if not _plain_url(mirror) or (security and not _plain_url(security)):
        return []
    rules = [f"s#^deb [^ ]+ ([a-z]+-security) #deb {security} \\1 #;t"] if security else []
    rules.append(f"s#^deb [^ ]+ #deb {mirror} #")
    return [f"if [ -f {sources} ]; then sed -i -E '{';'.join(rules)}' {sources}; fi"]


def _plain_url(text) -> bool:
    scheme, _, rest = text.partition("://")
    return scheme in ("http", "https") and bool(rest) and set(rest) <= _URL_CHARACTERS
