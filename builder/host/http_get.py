"""One door to HTTP for the builder: a GET with a bounded time, the host's CA bundle and the
builder's name as its User-Agent.

ssl and urllib.request are imported by the first request, not when a command starts: about
30 ms that most commands (render, jobscript, show) never use.

Example: with open_url(url, timeout=10, cafile=None) as answer: body = answer.read()
"""


def open_url(url: str, *, timeout: float, cafile=None, purpose: str = ""):
    """The answer to a GET of ``url`` (a context manager); raises OSError (HTTPError and
    URLError among them) or ValueError as urllib does. ``purpose`` joins the User-Agent."""
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=cafile) if url.startswith("https:") else None
    agent = f"hpc-ml-containers {purpose}".strip()
    request = urllib.request.Request(url, headers={"User-Agent": agent})
    return urllib.request.urlopen(request, timeout=timeout, context=context)
