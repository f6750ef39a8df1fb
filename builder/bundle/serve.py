"""A bundle's folder served over HTTP on 127.0.0.1 while a build runs, so that debootstrap on
the host and apt-get inside the container (which shares the host's network) fetch from it as
they would from a mirror, and check Debian's signed files as they would online.

Read only: GET and HEAD of the files under the folder, no directory listings, nothing outside
it. apt asks for indexes by hash when the Release file says `Acquire-By-Hash: yes`: a request
for `DIR/by-hash/SHA256/<hex>` is answered with the file in DIR whose sha256 the bundle lists
as <hex>. Anything else is a 404; nothing is printed.

Example:

    with serving(bundle / "debian", manifest.read(bundle), root=bundle) as url:
        # url == "http://127.0.0.1:41234"; debootstrap ... bookworm ROOT {url}/
"""

import contextlib
import http.server
import re
import shutil
import threading
import urllib.parse
from pathlib import Path

from ..fileio import CHUNK

HOST = "127.0.0.1"
STOP_WAIT_S = 5  # for the serving thread to end once asked to
POLL_S = 0.05  # how soon the serving thread sees that it is asked to stop
IDLE_S = 60  # a kept-alive connection that sends nothing for this long is closed
BY_HASH = re.compile(r"(?P<dir>.*)/by-hash/SHA256/(?P<hex>[0-9a-f]{64})")
UNSAFE = {".", ".."}


@contextlib.contextmanager
def serving(folder: Path, files: dict, *, root: Path = None, requests: list = None):
    """Serve ``folder`` on 127.0.0.1 (a port the system chooses) in a daemon thread; yield its
    base URL, "http://127.0.0.1:PORT", and stop on exit. ``files``: {path: sha256}, the paths
    relative to ``root`` (the bundle; default: the first of ``folder`` and its parents that
    they name files of ``folder`` from), for the by-hash requests. When ``requests`` is a list,
    each request is appended to it as (method, path, status), to tell what a client missed."""
    folder = Path(folder).resolve()
    by_hash = _by_hash(folder, _relative(folder, files, root))
    handler = type("Handler", (_Handler,), {"folder": folder, "by_hash": by_hash, "log": requests})
    server = _Server((HOST, 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(POLL_S,), name="bundle-server", daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(STOP_WAIT_S)


def _relative(folder: Path, files: dict, root) -> dict:
    """``files`` as {path relative to ``folder``: sha256}, those outside it left out."""
    roots = [Path(root).resolve()] if root is not None else [folder, *folder.parents]
    for base in roots:
        prefix = folder.relative_to(base).as_posix() if folder.is_relative_to(base) else None
        if prefix is None:
            continue
        lead = "" if prefix == "." else prefix + "/"
        inside = {path[len(lead) :]: sha256 for path, sha256 in files.items() if path.startswith(lead)}
        if root is not None or any((folder / path).is_file() for path in inside):
            return inside
    return {}


def _by_hash(folder: Path, files: dict) -> dict:
    """{(dir, sha256): path}, all relative to ``folder``."""
    found = {}
    for path, sha256 in files.items():
        parent, _, _ = path.rpartition("/")
        found.setdefault((parent, sha256), path)
    return found


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # a client that keeps its connection open does not hold the exit
    block_on_close = False

    def handle_error(self, request, client_address):
        pass  # a client that hangs up mid-file is its own business: nothing on stderr


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: apt asks for many files on one connection
    timeout = IDLE_S
    folder: Path
    by_hash: dict
    log: list = None

    def do_GET(self):
        self._answer(body=True)

    def do_HEAD(self):
        self._answer(body=False)

    def log_message(self, format, *args):
        pass  # quiet: a build's output is the build's

    def _answer(self, body: bool):
        path, status = self._find()
        if self.log is not None:
            self.log.append((self.command, self.path, status))
        if path is None:
            self.send_error(status)
            return
        with open(path, "rb") as handle:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(path.stat().st_size))
            self.end_headers()
            if body:
                with contextlib.suppress(OSError):  # the client went away
                    shutil.copyfileobj(handle, self.wfile, CHUNK)

    def _find(self):
        """(the file to send, 200), or (None, 403 or 404)."""
        wanted = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        parts = wanted.split("/")[1:]
        if not wanted.startswith("/") or "\0" in wanted or "\\" in wanted or UNSAFE & set(parts) or "" in parts[:-1]:
            return None, 403
        relative = "/".join(parts)
        path = (self.folder / relative).resolve()
        if not path.is_relative_to(self.folder):
            return None, 403  # a link that leads out of the folder
        if path.is_file():
            return path, 200
        match = BY_HASH.fullmatch(relative)
        if match and (match["dir"], match["hex"]) in self.by_hash:
            path = (self.folder / self.by_hash[match["dir"], match["hex"]]).resolve()
            if path.is_relative_to(self.folder) and path.is_file():
                return path, 200
        return None, 404
