"""The up-front pip index check, against real HTTP servers on loopback."""

import http.server
import socket
import threading

import pytest
from helpers.pip_sources import POLL_S

from builder.host import pip_indexes as indexes

ASKED = []  # the paths the servers were asked for


class _Index(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):
        ASKED.append(self.path)
        self.send_response(self.status)
        self.end_headers()
        self.wfile.write(b"<html></html>")

    def log_message(self, *args):
        pass


@pytest.fixture
def serve():
    servers = []

    def start(status):
        handler = type("Handler", (_Index,), {"status": status})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/simple"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_index_that_answers_is_kept_even_with_a_not_found(serve):
    assert indexes.why_down(serve(200)) is None
    assert indexes.why_down(serve(404)) is None  # pip does not retry a 404


def test_an_index_that_fails_says_why(serve):
    assert indexes.why_down(serve(503)) == "HTTP 503"
    reason = indexes.why_down(f"http://127.0.0.1:{closed_port()}/simple")
    assert "refused" in reason.lower()


def test_a_url_with_a_query_is_asked_as_it_is(serve):
    """A git server's info/refs (layerbuild.sources); a 401, as from a registry, is an answer."""
    git = serve(401).removesuffix("/simple") + "/org/repo.git/info/refs?service=git-upload-pack"
    assert indexes.why_down(git) is None
    assert indexes.why_down(serve(401) + "/v2") is None
    assert ASKED[-2:] == ["/org/repo.git/info/refs?service=git-upload-pack", "/simple/v2/"]
