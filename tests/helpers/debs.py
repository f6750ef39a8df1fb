"""Debian packages the tests unpack rather than install (one conflicts with an installed
package, one is only needed as a file): downloaded once into the user's cache."""

from pathlib import Path

from builder import runner
from builder.host.cache import cache_dir


def downloaded(package: str) -> Path:
    """The newest .deb of ``package`` in the cache, fetched with `apt-get download` when none is."""
    debs = cache_dir() / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        download = ["apt-get", "download", package]
        if runner.run(download, cwd=debs, check=False).returncode != 0:
            runner.run(["apt-get", "update", "-qq"])
            runner.run(download, cwd=debs)
        found = sorted(debs.glob(f"{package}_*.deb"))
    return found[-1]
