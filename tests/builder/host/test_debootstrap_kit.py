"""host.debootstrap_kit: Debian's debootstrap for a host without one (issue 51). Packages made
here with dpkg-deb and served from a file:// mirror; the pinned ones fetched from the host's
real mirror once, to prove the pins."""

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import RECIPES

from builder.errors import ToolError
from builder.host import debootstrap_kit, hostinfo
from builder.host.progress import Progress

FAKE_DEBOOTSTRAP = '#!/bin/sh\necho "dir=$DEBOOTSTRAP_DIR args=$*"\necho "path=$PATH"\n'


def make_deb(tmp_path, name, files) -> Path:
    """A real .deb (dpkg-deb --build) holding ``files`` {path: text}."""
    tree = tmp_path / f"{name}-tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n"
    )
    for path, text in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
        (tree / path).chmod(0o755)
    deb = tmp_path / "mirror" / "pool" / f"{name}_1_all.deb"
    deb.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "--build", "-Zgzip", str(tree), str(deb)], check=True, capture_output=True)
    return deb


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A file:// mirror with a fake debootstrap and keyring, pinned in place of Debian's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    debs = {
        "debootstrap": make_deb(
            tmp_path,
            "debootstrap",
            {
                "usr/sbin/debootstrap": FAKE_DEBOOTSTRAP,
                "usr/share/debootstrap/scripts/bookworm": "# script\n",
                "usr/share/doc/debootstrap/README": "not wanted\n",
            },
        ),
        "debian-archive-keyring": make_deb(
            tmp_path, "debian-archive-keyring", {"usr/share/keyrings/debian-archive-keyring.gpg": "keys\n"}
        ),
    }
    pins = {
        name: (str(deb.relative_to(tmp_path / "mirror")), hashlib.sha256(deb.read_bytes()).hexdigest())
        for name, deb in debs.items()
    }
    monkeypatch.setattr(debootstrap_kit, "PACKAGES", pins)
    monkeypatch.setattr(hostinfo, "debian_mirror", lambda: f"file://{tmp_path / 'mirror'}")
    return f"file://{tmp_path / 'mirror'}"


def test_the_kit_unpacks_only_what_debootstrap_needs_and_its_command_sets_the_scripts_folder(mirror, tmp_path):
    bin_dir = debootstrap_kit.kit_bin(Progress(), mirror)
    home = debootstrap_kit.home()
    assert bin_dir == home / "bin"
    assert (home / "usr/share/debootstrap/scripts/bookworm").is_file()
    assert (home / "usr/share/keyrings/debian-archive-keyring.gpg").is_file()
    assert not (home / "usr/share/doc").exists()  # only WANTED is unpacked
    with_gpgv = subprocess.run(
        [str(bin_dir / "debootstrap"), "bookworm"], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    )
    assert with_gpgv.stderr.startswith(debootstrap_kit.MARKER)
    scripts = home / "usr/share/debootstrap"
    if Path("/usr/bin/gpgv").exists():  # with a signature checker the kit's keyring is passed
        keyring = home / "usr/share/keyrings/debian-archive-keyring.gpg"
        first = with_gpgv.stdout.splitlines()[0]
        assert first == f"dir={scripts.resolve()} args=--keyring={keyring.resolve()} bookworm"
    # no gpgv or sqv: no --keyring (debootstrap would refuse it); it warns, and the image's apt checks
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    for tool in ("dirname", "readlink"):
        (bare / tool).symlink_to(shutil.which(tool))
    without = subprocess.run(
        [str(bin_dir / "debootstrap"), "bookworm"], capture_output=True, text=True, env={"PATH": str(bare)}
    )
    # a user's PATH without the sbin folders gains them: debootstrap runs chroot from there
    assert without.stdout == f"dir={scripts.resolve()} args=bookworm\npath={bare}:/usr/sbin:/sbin\n"


def test_a_second_use_fetches_nothing_and_brings_an_old_command_up_to_date(mirror, tmp_path, monkeypatch):
    debootstrap_kit.kit_bin(Progress(), mirror)
    command = debootstrap_kit.home() / "bin" / "debootstrap"
    command.write_text("#!/bin/sh\n# an older builder's\n")
    monkeypatch.setattr(debootstrap_kit, "fetch_pinned", lambda *args: pytest.fail("fetched again"))
    assert debootstrap_kit.kit_bin(Progress(), mirror) == debootstrap_kit.home() / "bin"
    assert command.read_text() == debootstrap_kit.WRAPPER and command.stat().st_mode & 0o777 == 0o755


def test_a_package_whose_sha256_differs_is_refused_and_nothing_is_left(mirror, tmp_path, monkeypatch):
    path, _ = debootstrap_kit.PACKAGES["debootstrap"]
    monkeypatch.setitem(debootstrap_kit.PACKAGES, "debootstrap", (path, "0" * 64))
    with pytest.raises(ToolError) as error:
        debootstrap_kit.kit_bin(Progress(), mirror)
    message = str(error.value)
    assert "sha256" in message and "expected 0000" in message and "\n" not in message
    kits = debootstrap_kit.home().parent
    assert not kits.exists() or list(kits.iterdir()) == []


def test_a_mirror_that_does_not_answer_is_one_line(mirror, tmp_path):
    with pytest.raises(ToolError) as error:
        debootstrap_kit.kit_bin(Progress(), f"file://{tmp_path / 'nowhere'}")
    assert str(error.value).startswith("cannot fetch debootstrap from file://") and "\n" not in str(error.value)


def test_a_host_without_debootstraps_own_needs_is_told_which_in_one_line(mirror, monkeypatch):
    have = {"tar", "dpkg-deb"}
    assert debootstrap_kit.missing_tools(lambda name: name in have) == ["wget", "perl"]
    assert debootstrap_kit.missing_tools(lambda name: name in {"tar", "wget", "perl"}) == ["ar or dpkg-deb"]
    monkeypatch.setattr(debootstrap_kit.shutil, "which", lambda name, path=None: None)
    with pytest.raises(ToolError) as error:
        debootstrap_kit.kit_bin(Progress(), mirror)
    assert str(error.value) == (
        "this host has no debootstrap, and the builder's own needs wget, perl, tar, ar or dpkg-deb on PATH; "
        "install them, or debootstrap itself, and retry"
    )
    assert not debootstrap_kit.home().exists()


def test_not_a_debian_package_is_one_line(tmp_path):
    with pytest.raises(ToolError, match="^not a Debian package: no ar header$"):
        debootstrap_kit.unpack(b"PK\x03\x04", tmp_path)
    with pytest.raises(ToolError, match=r"^not a Debian package: no data.tar among \['debian-binary'\]$"):
        header = b"debian-binary/".ljust(48) + b"4".ljust(10) + b"`\n"
        debootstrap_kit.unpack(b"!<arch>\n" + header + b"2.0\n", tmp_path)


@pytest.mark.parametrize(
    ("definition", "needed"),
    [("cpu.devel.def", True), ("cpu.base.def", True), ("cpu.def", False), ("gh200-cuda.devel.def", True)],
)
def test_the_layers_that_run_debootstrap_are_those_that_start_from_it(definition, needed):
    text = (RECIPES.parent / "containers" / definition).read_text()
    assert debootstrap_kit.needed_by(text) is needed


def test_the_path_puts_the_kit_first_only_where_the_host_has_no_debootstrap(mirror, tmp_path, monkeypatch):
    devel = (RECIPES.parent / "containers" / "cpu.devel.def").read_text()
    monkeypatch.setattr(debootstrap_kit, "host_debootstrap", lambda env_path=None: None)
    path = debootstrap_kit.search_path(devel, Progress(), "/usr/bin:/bin")
    assert path == f"{debootstrap_kit.home() / 'bin'}:/usr/bin:/bin"
    assert debootstrap_kit.search_path("Bootstrap: localimage\n", Progress(), "/usr/bin") is None
    monkeypatch.setattr(debootstrap_kit, "host_debootstrap", lambda env_path=None: "/usr/sbin/debootstrap")
    assert debootstrap_kit.search_path(devel, Progress(), "/usr/bin:/bin") is None


def test_a_build_from_a_bundle_takes_the_kit_from_the_bundle_not_the_hosts_mirror(mirror, tmp_path, monkeypatch):
    """The layer build passes its own mirror (a bundle's server, offline) down to the kit."""
    served = tmp_path / "bundle-debian"
    shutil.copytree(tmp_path / "mirror", served)
    shutil.rmtree(tmp_path / "mirror")  # the host's mirror answers nothing now
    monkeypatch.setattr(hostinfo, "debian_mirror", lambda: pytest.fail("asked the host's mirror"))
    monkeypatch.setattr(debootstrap_kit, "host_debootstrap", lambda env_path=None: None)
    devel = (RECIPES.parent / "containers" / "cpu.devel.def").read_text()
    path = debootstrap_kit.search_path(devel, Progress(), "/usr/bin:/bin", mirror=f"file://{served}")
    assert path.startswith(f"{debootstrap_kit.home() / 'bin'}:")
    assert (debootstrap_kit.home() / "usr" / "sbin" / "debootstrap").is_file()


def test_the_pinned_packages_are_what_the_debian_mirror_serves(tmp_path, monkeypatch):
    """The real pins, fetched from the host's mirror: their sha256 and contents hold. (The
    whole route, debootstrap under Apptainer's --fakeroot, is tests/images/test_kit_under_apptainer.py.)"""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    bin_dir = debootstrap_kit.kit_bin(Progress(), hostinfo.debian_mirror())
    version = subprocess.run([str(bin_dir / "debootstrap"), "--version"], capture_output=True, text=True)
    assert version.stdout == f"debootstrap {debootstrap_kit.VERSION}\n"
    assert (debootstrap_kit.home() / "usr/share/debootstrap/scripts/trixie").exists()
    assert (debootstrap_kit.home() / "usr/share/keyrings/debian-archive-keyring.gpg").exists()
