"""layerbuild.from_bundle.find_apptainer: in a build from a bundle, a host with no Apptainer
makes its toolbox from the bundle's copy; a bundle with none is refused in one line before
anything is built, and a host with Apptainer never needs one."""

import platform
from pathlib import Path

import pytest

from builder.bundle import toolbox_part
from builder.errors import ToolError
from builder.host import toolbox, which_apptainer
from builder.host.progress import Progress
from builder.layerbuild import from_bundle

SERVED = {"MIRROR": "http://127.0.0.1:40001/debian", "SECURITY_MIRROR": "http://127.0.0.1:40001/debian-security"}


@pytest.fixture
def asked(monkeypatch):
    """The mirror find_apptainer was given, and no installed Apptainer nor toolbox."""
    seen = []
    monkeypatch.setattr(which_apptainer, "installed_apptainer", lambda site: None)
    monkeypatch.setattr(toolbox, "is_ready", lambda: False)
    monkeypatch.setattr(
        which_apptainer,
        "find_apptainer",
        lambda site, progress, log_dir, mirror=None: seen.append(mirror) or ("a", "toolbox"),
    )
    return seen


def _bundle(*paths):
    return from_bundle.Bundle(Path("/b"), {path: "0" * 64 for path in paths})


def test_a_bundle_with_a_toolbox_is_the_mirror_it_is_made_from(asked):
    bundle = _bundle(toolbox_part.lock_path(platform.machine()))
    assert from_bundle.find_apptainer(bundle, SERVED, None, Progress(), Path("/l")) == ("a", "toolbox")
    assert asked == [SERVED["MIRROR"]]


def test_without_a_bundle_the_hosts_mirror_serves(asked):
    from_bundle.find_apptainer(None, SERVED, None, Progress(), Path("/l"))
    assert asked == [None]


def test_a_bundle_without_a_toolbox_on_a_host_without_apptainer_is_one_line(asked):
    with pytest.raises(ToolError) as caught:
        from_bundle.find_apptainer(_bundle("debian/dists/bookworm/Release"), SERVED, None, Progress(), Path("/l"))
    message = str(caught.value)
    assert message.startswith(
        f"/b: holds no Apptainer toolbox for {platform.machine()}, and this host has no Apptainer"
    )
    assert "\n" not in message and asked == []


def test_a_bundle_without_a_toolbox_is_fine_where_apptainer_is_installed(asked, monkeypatch):
    monkeypatch.setattr(which_apptainer, "installed_apptainer", lambda site: "/usr/bin/apptainer")
    from_bundle.find_apptainer(_bundle("debian/dists/bookworm/Release"), SERVED, None, Progress(), Path("/l"))
    assert asked == [None]
