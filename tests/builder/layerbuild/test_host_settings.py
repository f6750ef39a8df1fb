"""host_settings: the settings file a layer's %post sources while `builder build` runs points
a Debian root's apt at this build's mirrors, so that a layer on a lower layer made by an
earlier build (a bundle's loopback port, long closed) still reaches its packages; the lines
a shipped image comments out stay commented, and other roots are left alone."""

import subprocess

import pytest

from builder.layerbuild import host_settings, layers
from builder.render.plan import MIRROR_ARG, SECURITY_MIRROR_ARG

EARLIER = """deb http://127.0.0.1:40001/debian trixie main
deb http://127.0.0.1:40001/debian trixie-updates main
deb http://127.0.0.1:40001/debian-security trixie-security main
# deb MIRROR-URL trixie main
"""


def test_an_earlier_builds_mirror_is_replaced_by_this_ones_pocket_by_pocket(tmp_path):
    sources = tmp_path / "sources.list"
    sources.write_text(EARLIER)
    (line,) = host_settings.apt_lines(
        "http://127.0.0.1:40777/debian", "http://127.0.0.1:40777/debian-security", sources=sources
    )
    subprocess.run(["bash", "-c", line], check=True)
    assert sources.read_text() == (
        "deb http://127.0.0.1:40777/debian trixie main\n"
        "deb http://127.0.0.1:40777/debian trixie-updates main\n"
        "deb http://127.0.0.1:40777/debian-security trixie-security main\n"
        "# deb MIRROR-URL trixie main\n"
    )


def test_a_root_without_the_file_is_left_alone(tmp_path):
    (line,) = host_settings.apt_lines("http://mirror.test/debian", sources=tmp_path / "absent.list")
    assert subprocess.run(["bash", "-c", line]).returncode == 0 and not (tmp_path / "absent.list").exists()


@pytest.mark.parametrize("mirror", ["", "http://mirror.test/debian#x", "http://mirror.test/a b", "ftp://m/debian"])
def test_no_line_for_no_mirror_or_one_that_is_not_a_plain_url(mirror):
    assert host_settings.apt_lines(mirror, "") == []


def test_only_builds_of_debian_roots_pass_their_mirrors_to_every_layer():
    both = {MIRROR_ARG: "http://m.test/debian", SECURITY_MIRROR_ARG: "http://m.test/debian-security"}
    assert layers._apt_mirrors(both) == ("http://m.test/debian", "http://m.test/debian-security")
    assert layers._apt_mirrors({}) == ()  # a ROCm image's layers: Ubuntu's apt stays as it is


def test_the_settings_file_carries_the_line_online_and_from_a_bundle(tmp_path, monkeypatch):
    monkeypatch.setattr(host_settings.pip_indexes, "indexes_down", lambda indexes, progress=None: [])
    mirrors = ("http://127.0.0.1:40777/debian", "http://127.0.0.1:40777/debian-security")
    for offline in (False, True):
        host = tmp_path / f"host-{offline}"
        host_settings.write(host, (), None, offline=offline, apt_mirrors=mirrors)
        text = (host / "hpcml-build-host.sh").read_text()
        assert "sed -i -E 's#^deb [^ ]+ ([a-z]+-security) #deb http://127.0.0.1:40777/debian-security" in text
        assert text.rstrip("\n").endswith("/etc/apt/sources.list; fi")
