"""The CPU image rebuilt from its source bundle with the network cut holds the same files as
the online build: in a network namespace with only loopback, under another hostname, time
zone, locale, umask, checkout path and CPU count, with an empty cache of its own (the toolbox
shared: it is no part of the image). Before that, an online build from a local mirror on
which a point release replaced a locked version stops, naming the bundle as the way out.
Marker full: two cold builds, about 2 x 15 minutes on 2 cores (`make test-bundle`).
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

from builder import reproducible
from builder.bundle import manifest
from builder.host import cache
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


def test_a_bundle_rebuilds_the_online_image_with_no_network(apptainer, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("network and host-name namespaces are made as root here")
    started = time.monotonic()
    online = run_builder("build", "cpu", "--images", tmp_path / "online", timeout=BUILD_S)
    assert online.returncode == 0, online.stderr[-3000:]
    print(f"\nonline build: {time.monotonic() - started:.0f} s", file=sys.stderr)
    made = run_builder("bundle", "cpu", "--out", tmp_path / "bundle", timeout=1800)
    assert made.returncode == 0, made.stderr[-3000:]
    files = manifest.read(tmp_path / "bundle")
    print(f"bundle: {len(files)} files, {manifest.size(tmp_path / 'bundle', files) / 1e6:.0f} MB", file=sys.stderr)

    # a point release replaced a locked version: the online build stops before building
    mirror = _mirror_moved_on(tmp_path / "bundle", tmp_path / "moved-on-mirror", "hostname")
    drifted = _drifted_build(tmp_path / "bundle", mirror, tmp_path / "drifted")
    assert drifted.returncode == 1, drifted.stderr[-3000:]
    line = drifted.stderr.strip().splitlines()[-1]
    assert "hostname 3.23+nmu1 locked, 99:3.23+nmu1 served" in line, line
    assert "hpcml build cpu --bundle DIR" in line, line
    assert not list((tmp_path / "drifted").glob("*.sif")), "built from a mirror that moved on"

    home = tmp_path / "empty cache"
    (home / "hpc-ml-containers").mkdir(parents=True)
    (home / "hpc-ml-containers" / "toolbox").symlink_to(cache.cache_dir() / "toolbox")
    checkout = _checkout_elsewhere(tmp_path / "another" / "checkout")
    started = time.monotonic()
    offline = _offline_build(checkout, tmp_path / "bundle", tmp_path / "offline", home)
    assert offline.returncode == 0, offline.stderr[-3000:]
    print(f"offline build from the bundle: {time.monotonic() - started:.0f} s", file=sys.stderr)

    first, _, _ = _listing(apptainer, tmp_path / "online" / "cpu.sif", tmp_path / "root-online")
    second, hostname, sources = _listing(apptainer, tmp_path / "offline" / "cpu.sif", tmp_path / "root-offline")
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
