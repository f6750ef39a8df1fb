"""bundle.serve: a folder served read-only on 127.0.0.1, with apt's by-hash requests answered
from the bundle's list of files (no network beyond the loopback)."""

import hashlib
import http.client
import socket
import urllib.parse

import pytest

from builder.bundle.serve import serving

INDEX = b"Package: hello\nVersion: 1\n"
SHA = hashlib.sha256(INDEX).hexdigest()


@pytest.fixture
def bundle(tmp_path):
    """A bundle whose debian/ folder is the one served; a secret beside it."""
    index = tmp_path / "bundle" / "debian" / "dists" / "s" / "main" / "binary-amd64" / "Packages.xz"
    index.parent.mkdir(parents=True)
    index.write_bytes(INDEX)
    (tmp_path / "bundle" / "debian" / "pool" / "a+b.deb").parent.mkdir(parents=True)
    (tmp_path / "bundle" / "debian" / "pool" / "a+b.deb").write_bytes(b"deb")
    (tmp_path / "bundle" / "secret").write_text("not served")
    return tmp_path / "bundle"


FILES = {"debian/dists/s/main/binary-amd64/Packages.xz": SHA, "debian/pool/a+b.deb": "0" * 64}


def ask(url, path, method="GET"):
    """(status, headers, body) of one request sent as is: http.client keeps `..` in the path."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.request(method, path)
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        connection.close()


def test_get_serves_a_file_and_head_its_length_alone(bundle):
    with serving(bundle / "debian", FILES) as url:
        assert url.startswith("http://127.0.0.1:")
        status, headers, body = ask(url, "/dists/s/main/binary-amd64/Packages.xz")
        assert (status, body) == (200, INDEX)
        status, headers, body = ask(url, "/dists/s/main/binary-amd64/Packages.xz", "HEAD")
        assert (status, headers["Content-Length"], body) == (200, str(len(INDEX)), b"")
        assert ask(url, "/pool/a%2bb.deb")[::2] == (200, b"deb")  # apt quotes the + of a version


def test_by_hash_is_the_file_of_that_folder_with_that_sha256(bundle):
    by_hash = "/dists/s/main/binary-amd64/by-hash/SHA256/"
    with serving(bundle / "debian", FILES) as url:  # the bundle's prefix, debian/, found
        assert ask(url, by_hash + SHA)[::2] == (200, INDEX)
        assert ask(url, by_hash + "1" * 64)[0] == 404
        assert ask(url, "/dists/s/main/by-hash/SHA256/" + SHA)[0] == 404  # another folder's
    with serving(bundle / "debian", FILES, root=bundle) as url:
        assert ask(url, by_hash + SHA)[::2] == (200, INDEX)
    with serving(bundle / "debian", {path.removeprefix("debian/"): sha for path, sha in FILES.items()}) as url:
        assert ask(url, by_hash + SHA)[::2] == (200, INDEX)


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/dists/s/missing", 404),
        ("/dists/s/", 404),  # a folder: no listing
        ("/", 404),
        ("/../secret", 403),
        ("/dists/%2e%2e/../../secret", 403),
        ("/dists//s", 403),
    ],
)
def test_nothing_else_is_served(bundle, path, status):
    requests = []
    with serving(bundle / "debian", FILES, requests=requests) as url:
        got, _, body = ask(url, path)
        assert got == status and b"not served" not in body
        assert ask(url, path, "HEAD")[::2] == (status, b"")
    assert requests == [("GET", path, status), ("HEAD", path, status)]


def test_a_link_out_of_the_folder_is_refused(bundle):
    (bundle / "debian" / "link").symlink_to(bundle / "secret")
    with serving(bundle / "debian", FILES) as url:
        assert ask(url, "/link")[0] == 403


def test_other_methods_are_refused(bundle):
    with serving(bundle / "debian", FILES) as url:
        assert ask(url, "/pool/a+b.deb", "PUT")[0] == 501
        assert ask(url, "/pool/a+b.deb", "DELETE")[0] == 501
    assert (bundle / "debian" / "pool" / "a+b.deb").read_bytes() == b"deb"


def test_it_is_quiet_and_stops_on_exit(bundle, capfd):
    with serving(bundle / "debian", FILES) as url:
        ask(url, "/missing")
        ask(url, "/pool/a+b.deb")
    assert capfd.readouterr() == ("", "")
    port = urllib.parse.urlsplit(url).port
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
