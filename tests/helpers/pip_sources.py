"""Pip sources of a test's own: a wheel folder (pip's find-links) and a pip index on
loopback that serves nothing, set as the host pip's settings, so that uv and the builder see
only the wheels the test writes (`wheel`). Example:

    def test_x(pip_sources):  # the fixture, from conftest
        wheel(pip_sources, "alpha", "1.0", ["beta>=1"])
"""

import functools
import http.server
import threading
import zipfile

from builder.host import hostinfo
from builder.host import pip_indexes as indexes

POLL_S = 0.05  # how soon a server's thread sees shutdown(): serve_forever's default is half a second


def wheel(folder, name, version, requires=()):
    """A wheel uv can read: its METADATA (with Requires-Dist), WHEEL and RECORD."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    metadata = "".join(
        [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", *(f"Requires-Dist: {r}\n" for r in requires)]
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(f"{info}/METADATA", metadata)
        archive.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{info}/RECORD", "")
    return path


def serve(tmp_path, monkeypatch):
    """The wheel folder and an empty index, as the host pip's settings name them."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    # a folder of its own: served from the working folder, a request after another test
    # removed that folder breaks the connection, and uv retries for seconds before it fails
    empty = tmp_path / "served-nothing"
    empty.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(empty))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True).start()
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/nothing/")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    hostinfo.pip_settings.cache_clear()
    indexes.why_down.cache_clear()
    yield folder
    server.shutdown()
    server.server_close()
    hostinfo.pip_settings.cache_clear()
