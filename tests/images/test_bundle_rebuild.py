"""The CPU image rebuilt from its source bundle with the network cut is the online build's
file, byte for byte, each layer too: in a network namespace with only loopback, under another hostname, time
zone, locale, umask, checkout path and CPU count, with an empty cache of its own, so that
root's Apptainer toolbox is made from the bundle too. Before that, an online build from a
local mirror on which a point release replaced a locked version stops, naming the bundle as
the way out. Then an ordinary user on the site's login node (helpers/site_login.py: the
site's Apptainer, no debootstrap, Python 3.13) sets the builder up and builds from the same
bundle with no network, with the site's Apptainer and --fakeroot, and gets the same bytes again.
Marker full: three cold builds, about 3 x 15 minutes on 2 cores (`make test-bundle`).
Figures: docs/performance.md#locks-and-rebuilds."""

import hashlib
import lzma
import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest
from conftest import ROOT, run_builder
from helpers import site_login

from builder import reproducible
from builder.bundle import manifest
from builder.fileio import sha256_file
from builder.host import hostinfo
from builder.sbom import rootfs

pytestmark = pytest.mark.full
BUILD_S = 5400


def _checkout_elsewhere(where):
    """The working tree's files (tracked and new, as git lists them) at another path."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            (where / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, where / os.fsdecode(name))
    return where


def _offline_build(checkout, bundle, images, home):
    """`hpcml build cpu --bundle` in new network and host-name namespaces, on one core."""
    inner = " && ".join(
        [
            "ip link set lo up",
            "hostname bundle-rebuild-host",
            "umask 0077",
            shlex.join(
                [
                    "taskset",
                    "-c",
                    "0",
                    sys.executable,
                    "-m",
                    "builder",
                    "build",
                    "cpu",
                    "--images",
                    str(images),
                    "--bundle",
                    str(bundle),
                ]
            ),
        ]
    )
    env = dict(
        os.environ,
        PYTHONPATH=str(checkout),
        XDG_CACHE_HOME=str(home),
        TZ="Pacific/Chatham",
        LANG="fi_FI.UTF-8",
        LC_ALL="",
        HOME=str(home),
    )
    return subprocess.run(
        ["unshare", "--net", "--uts", "sh", "-c", inner],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_S,
    )


def _mirror_moved_on(bundle, dest, name):
    """A local, unsigned mirror of the bundle's indexes (debian/ and debian-security/) on
    which package ``name`` has a newer version than the locked one, as after a point release."""
    for release in bundle.glob("*/dists/*/Release"):
        suite = release.parent
        out = dest / suite.relative_to(bundle)
        sums = []
        for packed in sorted(suite.glob("*/binary-*/Packages.xz")):
            text = lzma.decompress(packed.read_bytes()).decode()
            moved = f"Package: {name}\n"  # a newer epoch: the locked version is gone
            stanzas = text.split("\n\n")
            stanzas = [s.replace("\nVersion: ", "\nVersion: 99:", 1) if s.startswith(moved) else s for s in stanzas]
            data = "\n\n".join(stanzas).encode()
            path = packed.relative_to(suite).with_suffix("")
            (out / path).parent.mkdir(parents=True, exist_ok=True)
            (out / path).write_bytes(data)
            sums.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {path.as_posix()}")
        head = [line for line in release.read_text().splitlines() if line.split(":")[0] in ("Suite", "Codename")]
        (out / "Release").write_text("\n".join([*head, "Components: main", "SHA256:", *sums]) + "\n")
    return dest


def _drifted_build(bundle, mirror, images):
    """An online build of cpu from ``mirror`` (made by _mirror_moved_on)."""
    env = {"HPCML_MIRROR": f"file:{mirror}/debian", "HPCML_SECURITY_MIRROR": f"file:{mirror}/debian-security"}
    return run_builder("build", "cpu", "--images", images, env=env, timeout=600)


def _listing(apptainer, image, work):
    root = rootfs.unpack(apptainer, image, work)
    hostname = (root / "etc/hostname").read_text()
    sources = (root / "etc/apt/sources.list").read_text()
    listing = rootfs.listing(root)
    shutil.rmtree(work, ignore_errors=True)
    return listing, hostname, sources


@pytest.fixture(scope="module")
def online(tmp_path_factory):
    """(the online build's image, the bundle made after it)."""
    if os.geteuid() != 0:
        pytest.skip("network and host-name namespaces are made as root here")
    where = tmp_path_factory.mktemp("online")
    started = time.monotonic()
    built = run_builder("build", "cpu", "--images", where / "images", timeout=BUILD_S)
    assert built.returncode == 0, built.stderr[-3000:]
    print(f"\nonline build: {time.monotonic() - started:.0f} s", file=sys.stderr)
    started = time.monotonic()
    made = run_builder("bundle", "cpu", "--out", where / "bundle", timeout=1800)
    assert made.returncode == 0, made.stderr[-3000:]
    files = manifest.read(where / "bundle")
    size = manifest.size(where / "bundle", files) / 1e6
    print(f"bundle: {len(files)} files, {size:.0f} MB, {time.monotonic() - started:.0f} s", file=sys.stderr)
    return where / "images" / "cpu.sif", where / "bundle"


def _same_files(apptainer, reference, image, work):
    """The two images hold the same files (named where they differ), and are the same bytes,
    each layer's SIF too; the rebuilt one's hostname and apt sources hold nothing of the host
    that built it."""
    first, _, _ = _listing(apptainer, reference, work / "root-reference")
    second, hostname, sources = _listing(apptainer, image, work / "root-rebuilt")
    differ = rootfs.differing(first, second)
    print(f"{len(first)} paths; {len(differ)} differ: {differ[:20]}", file=sys.stderr)
    assert differ == [], differ[:20]
    assert rootfs.digest(first) == rootfs.digest(second)
    assert hostname == f"{reproducible.NEUTRAL_HOSTNAME}\n"
    assert sources == (
        f"# deb {reproducible.MIRROR_PLACEHOLDER} bookworm main\n"
        f"# deb {reproducible.MIRROR_PLACEHOLDER} bookworm-updates main\n"
        f"# deb {reproducible.SECURITY_PLACEHOLDER} bookworm-security main\n"
    )
    for name in ("cpu.devel.sif", "cpu.base.sif", "cpu.sif"):
        sums = [sha256_file(folder / name) for folder in (reference.parent, image.parent)]
        print(f"{name}: sha256 {sums[0]} and {sums[1]}", file=sys.stderr)
        assert sums[0] == sums[1], name


def test_a_bundle_rebuilds_the_online_image_with_no_network(apptainer, online, tmp_path):
    image, bundle = online
    # a point release replaced a locked version: the online build stops before building
    mirror = _mirror_moved_on(bundle, tmp_path / "moved-on-mirror", "hostname")
    drifted = _drifted_build(bundle, mirror, tmp_path / "drifted")
    assert drifted.returncode == 1, drifted.stderr[-3000:]
    line = drifted.stderr.strip().splitlines()[-1]
    assert "hostname 3.23+nmu1 locked, 99:3.23+nmu1 served" in line, line
    assert "hpcml build cpu --bundle DIR" in line, line
    assert not list((tmp_path / "drifted").glob("*.sif")), "built from a mirror that moved on"

    home = tmp_path / "empty cache"  # no toolbox: root's is made from the bundle
    home.mkdir()
    checkout = _checkout_elsewhere(tmp_path / "another" / "checkout")
    started = time.monotonic()
    offline = _offline_build(checkout, bundle, tmp_path / "offline", home)
    assert offline.returncode == 0, offline.stderr[-3000:]
    print(f"offline build from the bundle: {time.monotonic() - started:.0f} s", file=sys.stderr)
    assert "toolbox: debootstrap trixie" in offline.stderr and "toolbox ready: apptainer version" in offline.stderr
    _same_files(apptainer, image, tmp_path / "offline" / "cpu.sif", tmp_path)


USER_SCRIPT = """set -eu
[ "$(id -u)" != 0 ]
if command -v apt-get || command -v debootstrap; then echo "apt-get or debootstrap on PATH" >&2; exit 3; fi
if getent hosts pypi.org >/dev/null; then echo "the network answers" >&2; exit 3; fi
python3 --version
git clone -q "$HOME/hpc-ml-containers.git" hpc
cd hpc
make build TARGET=cpu BUNDLE="$HOME/bundle"
"""


def test_an_ordinary_user_rebuilds_it_from_the_bundle_with_no_network(apptainer, online, tmp_path):
    image, bundle = online
    box = site_login.ready()
    home = site_login.user_home()
    try:
        site_login.clone_for(home)
        subprocess.run(["cp", "-al", str(bundle), str(home / "bundle")], check=True, timeout=300)  # root's, read-only
        started = time.monotonic()
        env = {"HPCML_MIRROR": hostinfo.debian_mirror()}  # as on a login node with no apt sources
        done = site_login.run_as_user(box, home, USER_SCRIPT, env=env, offline=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
        print(f"offline build as {site_login.USER}: {time.monotonic() - started:.0f} s", file=sys.stderr)
        assert done.stdout.startswith("Python 3.13"), done.stdout[:200]
        images = home / "hpc" / "images"
        assert (images / "cpu.sif").stat().st_uid == site_login.UID
        _same_files(apptainer, image, images / "cpu.sif", tmp_path)
    finally:
        shutil.rmtree(home, ignore_errors=True)
