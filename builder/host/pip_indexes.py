"""Which pip indexes answer from this build host, asked once per build.

pip retries an index that does not answer five times for every package it looks up; on an
air-gapped or proxied host that is minutes of a build spent on warnings. The builder asks each
index once, up front (one request, a short timeout), and leaves out the ones that fail: from
the host settings it passes to %post, and, through HPCML_PIP_INDEXES_DOWN, from the recipe's
own `--extra-index-url` lines (see render.blocks.torch); the layer plan names those.
"""

import urllib.error
from functools import cache

from . import hostinfo
from .http_get import open_url

TIMEOUT_S = 10
# pip retries these statuses; anything else means the index is there (a 404 fails fast)
_RETRIED = {500, 502, 503, 504, 520, 527}


@cache
def why_down(url: str, cafile=None):
    """None when ``url`` answers; otherwise a short reason (for the build's progress). A URL
    with a query (a git server's info/refs?service=...) is asked as it is, others as a folder."""
    try:
        with _get(url if "?" in url else url.rstrip("/") + "/", cafile):
            return None
    except urllib.error.HTTPError as error:
        return f"HTTP {error.code}" if error.code in _RETRIED else None
    except urllib.error.URLError as error:
        return str(getattr(error.reason, "strerror", None) or error.reason)
    except (OSError, ValueError) as error:  # timeouts, resets, malformed URLs
        return str(error) or type(error).__name__


def lists(url: str, project: str, prefix: str, cafile=None) -> bool:
    """Whether the simple index at ``url`` lists a file of ``project`` starting with ``prefix``."""
    try:
        with _get(f"{url.rstrip('/')}/{project}/", cafile) as page:
            return prefix in page.read().decode("utf-8", errors="replace")
    except (OSError, ValueError):  # HTTPError and URLError are OSErrors
        return False


def _get(url, cafile):
    return open_url(url, timeout=TIMEOUT_S, cafile=cafile, purpose="index check")


def indexes_down(pip_indexes, progress=None) -> list:
    """The host's pip indexes and ``pip_indexes`` (a layer's own) that do not answer. Each is
    asked once per process (why_down), so a build's layer keys, taken first, and its
    %post settings agree on what was left out. Said in ``progress`` when given: by the layer
    build that leaves one out, not by a build that finds its image up to date or refuses."""
    pip = hostinfo.pip_settings()
    urls = [pip["index_url"], *pip["extra_index_urls"], *pip_indexes]
    down = []
    for url in dict.fromkeys(u for u in urls if u):
        reason = why_down(url, pip["cert"])
        if reason is None:
            continue
        down.append(url)
        if progress:
            progress.once(f"pip index {url} does not answer ({reason}); this build leaves it out")
    return down
