"""bundle.debian_part: the Debian half of a bundle from a small file: mirror written here (no
network; one test signs one with a key made here and serves it over HTTP); one `tools` test
bundles from the host's Debian mirror and has the host's apt-get update and download from it."""

import dataclasses
import email.utils
import hashlib
import lzma
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from builder.bundle import debian_part, fetched, manifest, release, serve
from builder.errors import ToolError
from builder.host import debian_resolve, hostinfo
from builder.lockfile import DebianLock, DebPackage, load_debian

ROOT = Path(__file__).resolve().parents[3]
SUITE = "testing-suite"
LOCK_PATH = "recipes/locks/t/debian-final.txt"
# (name, version, arch): a tiny fake .deb each; hello-data is arch all, in the amd64 index
DEBS = [("hello", "2.10-3", "amd64"), ("hello-data", "2.10-3", "all"), ("libfoo1", "1:1.0+dfsg-1~x", "amd64")]


def deb_bytes(name, version, arch) -> bytes:
    return f"!<arch>\ndebian-binary {name} {version} {arch}\n".encode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def filename(name, version, arch) -> str:
    return f"pool/main/{name[0]}/{name}/{name}_{version.partition(':')[2] or version}_{arch}.deb"


def write_mirror(tmp_path, unlisted=()) -> Path:
    """A mirror of SUITE, main, amd64: Packages.xz, Translation-en.xz, an unsigned Release
    and the .debs; the stanzas of ``unlisted`` (names) are left out of the index."""
    return write_suite(tmp_path / "mirror", SUITE, DEBS, unlisted)


def write_suite(top, suite, debs, unlisted=()) -> Path:
    """Suite ``suite`` of the mirror at ``top``, as write_mirror makes it, of ``debs``."""
    stanzas = []
    for name, version, arch in debs:
        data = deb_bytes(name, version, arch)
        (top / filename(name, version, arch)).parent.mkdir(parents=True, exist_ok=True)
        (top / filename(name, version, arch)).write_bytes(data)
        if name not in unlisted:
            stanzas.append(
                f"Package: {name}\nVersion: {version}\nArchitecture: {arch}\nDescription: a {name}\n more text\n"
                f"Filename: {filename(name, version, arch)}\nSize: {len(data)}\nSHA256: {sha(data)}\n"
            )
    dists = top / "dists" / suite
    indexes = {
        "main/binary-amd64/Packages.xz": lzma.compress("\n".join(stanzas).encode()),
        "main/i18n/Translation-en.xz": lzma.compress(b"Package: hello\nDescription-en: hello\n"),
    }
    for path, data in indexes.items():
        (dists / path).parent.mkdir(parents=True, exist_ok=True)
        (dists / path).write_bytes(data)
    sums = "".join(f" {sha(data)} {len(data):8} {path}\n" for path, data in sorted(indexes.items()))
    (dists / "Release").write_text(
        f"Suite: {suite}\nCodename: {suite}\nDate: {email.utils.formatdate(usegmt=True)}\nAcquire-By-Hash: yes\n"
        f"Architectures: amd64\nComponents: main\nMD5Sum:\n 00 1 main/binary-amd64/Packages.xz\nSHA256:\n{sums}"
    )
    return top


def lock_of(stage="final", names=None, **changes) -> DebianLock:
    packages = tuple(DebPackage(n, v, a, sha(deb_bytes(n, v, a))) for n, v, a in DEBS if names is None or n in names)
    lock = DebianLock(stage, SUITE, "amd64", ("main",), ("hello",), packages, LOCK_PATH)
    return dataclasses.replace(lock, **changes)


@pytest.fixture
def mirror(tmp_path) -> Path:
    return write_mirror(tmp_path)


def make_bundle(mirror: Path, bundle: Path, locks) -> dict:
    files = debian_part.fetch_indexes(locks, f"file:{mirror}", bundle)
    files |= debian_part.fetch_debs(locks, f"file:{mirror}", bundle)
    manifest.write(bundle, files)
    return files


def test_a_bundle_is_a_partial_mirror_of_the_locked_files(mirror, tmp_path):
    bundle = tmp_path / "bundle"
    files = make_bundle(mirror, bundle, [lock_of()])
    for name, version, arch in DEBS:  # arch all came from the amd64 index
        relpath = f"debian/{filename(name, version, arch)}"
        assert files[relpath] == sha(deb_bytes(name, version, arch))
        assert (bundle / relpath).read_bytes() == (mirror / filename(name, version, arch)).read_bytes()
    for path in ("Release", "main/binary-amd64/Packages.xz", "main/i18n/Translation-en.xz"):
        relpath = f"debian/dists/{SUITE}/{path}"
        assert files[relpath] == sha((mirror / "dists" / SUITE / path).read_bytes())
    assert files.keys() == {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()} - {"SHA256SUMS"}
    debian_part.check_against_locks([lock_of()], bundle, manifest.check(bundle))


def test_a_package_locked_in_two_stages_is_fetched_once_and_kept_the_next_time(mirror, tmp_path, monkeypatch):
    bundle = tmp_path / "bundle"
    locks = [lock_of("build"), lock_of("final", names={"hello"})]
    debian_part.fetch_indexes(locks, f"file:{mirror}", bundle)
    calls, real = [], fetched.fetch
    monkeypatch.setattr(fetched, "fetch", lambda url, dest, sha256: calls.append(real(url, dest, sha256)))
    assert len(debian_part.deb_files(locks, bundle)) == len(DEBS)
    debian_part.fetch_debs(locks, f"file:{mirror}", bundle)
    debian_part.fetch_debs(locks, f"file:{mirror}", bundle)
    assert calls == ["fetched"] * len(DEBS) + ["kept"] * len(DEBS)


def test_a_deb_the_mirror_lacks_is_named_and_progress_names_those_fetched(mirror, tmp_path):
    bundle, lines = tmp_path / "bundle", []
    debian_part.fetch_indexes([lock_of()], f"file:{mirror}", bundle)
    debian_part.fetch_debs([lock_of(names={"hello"})], f"file:{mirror}", bundle, progress=Lines(lines))
    assert lines == [f"fetched {filename(*DEBS[0])}"]
    (mirror / filename(*DEBS[1])).unlink()
    with pytest.raises(
        ToolError, match=r"hello-data_2\.10-3_all\.deb: could not fetch it \(.*\); make the bundle again"
    ):
        debian_part.fetch_debs([lock_of()], f"file:{mirror}", bundle, progress=Lines(lines))


@dataclasses.dataclass
class Lines:
    lines: list

    def step(self, message):
        self.lines.append(message)


def test_deb_files_gives_the_path_to_fetch_from_and_the_sha256(mirror, tmp_path):
    bundle = tmp_path / "bundle"
    debian_part.fetch_indexes([lock_of()], f"file:{mirror}", bundle)
    found = debian_part.deb_files([lock_of()], bundle)
    name, version, arch = DEBS[2]  # the epoch is not in the file name
    assert found[f"debian/{filename(name, version, arch)}"] == (
        "pool/main/l/libfoo1/libfoo1_1.0+dfsg-1~x_amd64.deb",
        sha(deb_bytes(name, version, arch)),
    )


def test_a_tampered_deb_on_the_mirror_is_refused_naming_it(mirror, tmp_path):
    (mirror / filename(*DEBS[0])).write_bytes(b"not the locked bytes")
    bundle = tmp_path / "bundle"
    debian_part.fetch_indexes([lock_of()], f"file:{mirror}", bundle)
    with pytest.raises(ToolError, match=r"hello_2\.10-3_amd64\.deb: served with sha256 [0-9a-f]{64}, expected") as e:
        debian_part.fetch_debs([lock_of()], f"file:{mirror}", bundle)
    assert "\n" not in str(e.value)
    assert not (bundle / "debian" / filename(*DEBS[0])).exists()


def test_a_tampered_deb_in_the_bundle_is_refused_naming_it(mirror, tmp_path):
    bundle = tmp_path / "bundle"
    files = make_bundle(mirror, bundle, [lock_of()])
    tampered = f"debian/{filename(*DEBS[1])}"
    (bundle / tampered).write_bytes(b"changed")
    with pytest.raises(ToolError, match=f"{tampered}: its sha256 is"):
        manifest.check(bundle)
    # a SHA256SUMS written again to match: the lock still refuses it
    files[tampered] = sha(b"changed")
    with pytest.raises(ToolError, match=f"{tampered}: hello-data=2.10-3 of {LOCK_PATH} is not in the bundle"):
        debian_part.check_against_locks([lock_of()], bundle, files)


def test_a_locked_package_the_index_lacks_is_refused_naming_it_and_the_lock(tmp_path):
    mirror = write_mirror(tmp_path, unlisted={"libfoo1"})
    bundle = tmp_path / "bundle"
    debian_part.fetch_indexes([lock_of()], f"file:{mirror}", bundle)
    with pytest.raises(ToolError) as e:
        debian_part.deb_files([lock_of()], bundle)
    message = str(e.value)
    assert message.startswith(f"{LOCK_PATH}: libfoo1=1:1.0+dfsg-1~x amd64 is not in the {SUITE} amd64 index")
    assert "no longer serves what the lock names" in message and "\n" not in message


def test_an_index_sha256_other_than_the_locks_is_refused(mirror, tmp_path):
    bundle = tmp_path / "bundle"
    debian_part.fetch_indexes([lock_of()], f"file:{mirror}", bundle)
    other = dataclasses.replace(lock_of().packages[0], sha256="0" * 64)
    lock = lock_of(packages=(other, *lock_of().packages[1:]))
    with pytest.raises(ToolError, match=f"{LOCK_PATH}: hello=2.10-3 amd64 has sha256 [0-9a-f]{{64}} in .*no longer"):
        debian_part.fetch_debs([lock], f"file:{mirror}", bundle)


def test_an_index_other_than_the_release_says_is_refused(mirror, tmp_path):
    index = mirror / "dists" / SUITE / "main" / "binary-amd64" / "Packages.xz"
    index.write_bytes(lzma.compress(b"Package: other\n"))
    with pytest.raises(ToolError, match=r"Packages\.xz: served with sha256"):
        debian_part.fetch_indexes([lock_of()], f"file:{mirror}", tmp_path / "bundle")


def test_a_bundle_whose_index_is_not_the_releases_is_refused(mirror, tmp_path):
    bundle = tmp_path / "bundle"
    files = make_bundle(mirror, bundle, [lock_of()])
    files[f"debian/dists/{SUITE}/main/binary-amd64/Packages.xz"] = "0" * 64
    with pytest.raises(ToolError, match=r"binary-amd64/Packages\.xz: not in the bundle with the sha256 its Release"):
        debian_part.check_against_locks([lock_of()], bundle, files)


def test_a_component_the_release_lacks_is_refused(mirror, tmp_path):
    lock = lock_of(components=("main", "contrib"))
    with pytest.raises(ToolError, match=r"dists/testing-suite/Release lists no contrib/binary-amd64/Packages\.xz"):
        debian_part.fetch_indexes([lock], f"file:{mirror}", tmp_path / "bundle")


def test_deb_files_without_the_indexes_says_to_make_the_bundle(tmp_path):
    with pytest.raises(ToolError, match=r"Packages\.xz: missing from the bundle; make it again"):
        debian_part.deb_files([lock_of()], tmp_path / "bundle")


# A signed mirror: a key made here stands in for Debian's, the mirror is served over HTTP
@pytest.fixture
def signed(mirror, tmp_path, monkeypatch):
    """The mirror's Release signed as InRelease and Release.gpg; the keyring with the key."""
    if not shutil.which("gpg"):
        pytest.skip("gpg is not installed")
    home = tempfile.mkdtemp(prefix="hpcml-gpg-")  # short: gpg-agent's socket lives there
    env = dict(os.environ, GNUPGHOME=home)
    gpg = ["gpg", "--batch", "--yes", "--pinentry-mode", "loopback", "--passphrase", ""]
    dists = mirror / "dists" / SUITE
    try:
        subprocess.run(
            [*gpg, "--quick-gen-key", "Test <t@example.org>", "ed25519", "sign", "never"], env=env, check=True
        )
        subprocess.run([*gpg, "--clearsign", "-o", dists / "InRelease", dists / "Release"], env=env, check=True)
        subprocess.run(
            [*gpg, "-a", "--detach-sign", "-o", dists / "Release.gpg", dists / "Release"], env=env, check=True
        )
        subprocess.run([*gpg, "--export", "-o", tmp_path / "keyring.gpg"], env=env, check=True)
        (tmp_path / "other").write_text("another file\n")  # its signature: a good one, of other bytes
        subprocess.run(
            [*gpg, "-a", "--detach-sign", "-o", tmp_path / "other.gpg", tmp_path / "other"], env=env, check=True
        )
    finally:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, check=False)
        shutil.rmtree(home, ignore_errors=True)
    monkeypatch.setattr(release, "KEYRING", tmp_path / "keyring.gpg")
    return mirror


def test_a_signed_mirror_over_http_is_checked_with_the_keyring(signed, tmp_path):
    bundle = tmp_path / "bundle"
    with serve.serving(signed, {}) as url:
        files = make_bundle_from(url, bundle)
    assert {f"debian/dists/{SUITE}/{name}" for name in ("InRelease", "Release", "Release.gpg")} <= files.keys()
    debian_part.check_against_locks([lock_of()], bundle, manifest.check(bundle))
    # the bundle served in turn is a mirror to bundle from
    with serve.serving(bundle / "debian", files, root=bundle) as url:
        assert make_bundle_from(url, tmp_path / "again") == files


def make_bundle_from(url, bundle):
    files = debian_part.fetch_indexes([lock_of()], url, bundle)
    files |= debian_part.fetch_debs([lock_of()], url, bundle)
    manifest.write(bundle, files)
    return files


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        ("InRelease", r"/InRelease: no good signature by a key of .*keyring\.gpg"),
        ("Release", r"/Release: not what its InRelease says"),
    ],
)
def test_a_release_not_as_signed_is_refused(signed, tmp_path, changed, expected):
    path = signed / "dists" / SUITE / changed
    if changed == "Release.gpg":
        shutil.copy(tmp_path / "other.gpg", path)
    else:
        path.write_bytes(path.read_bytes().replace(b"Codename: testing-suite", b"Codename: testing-suitX"))
    with serve.serving(signed, {}) as url, pytest.raises(ToolError, match=expected) as e:
        debian_part.fetch_indexes([lock_of()], url, tmp_path / "bundle")
    assert url in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "bundle").exists()


def test_a_stale_release_gpg_beside_a_good_inrelease_is_left_out(signed, tmp_path):
    """A lagging mirror served trixie's Release.gpg of September beside November's InRelease
    (2026-12-02): apt and debootstrap read InRelease, so the bundle keeps that alone."""
    shutil.copy(tmp_path / "other.gpg", signed / "dists" / SUITE / "Release.gpg")
    with serve.serving(signed, {}) as url:
        files = debian_part.fetch_indexes([lock_of()], url, tmp_path / "bundle")
    assert f"debian/dists/{SUITE}/InRelease" in files and f"debian/dists/{SUITE}/Release" in files
    assert f"debian/dists/{SUITE}/Release.gpg" not in files
    assert not (tmp_path / "bundle" / "debian" / "dists" / SUITE / "Release.gpg").exists()


def test_an_unsigned_http_mirror_is_refused(mirror, tmp_path):
    with serve.serving(mirror, {}) as url, pytest.raises(ToolError, match=f"{url}/dists/{SUITE}/InRelease: could not"):
        debian_part.fetch_indexes([lock_of()], url, tmp_path / "bundle")


# The network: the host's Debian mirrors (about 15 MB of indexes); a few small packages, one
# of them (ca-certificates) newer in a pocket than in the suite
SMALL = ("base-passwd", "ca-certificates", "debianutils", "hostname")


@pytest.mark.tools
def test_apt_updates_and_downloads_from_a_bundle_of_the_host_mirror(tmp_path):
    lock = load_debian(ROOT / "recipes", "cpu", "final")
    few = dataclasses.replace(lock, packages=tuple(p for p in lock.packages if p.name in SMALL))
    bundle = tmp_path / "bundle"
    mirrors = {"debian": hostinfo.debian_mirror(), "debian-security": hostinfo.security_mirror()}
    files = debian_part.fetch_indexes([lock], mirrors, bundle)
    files |= debian_part.fetch_debs([few], mirrors, bundle)
    for top, suite in lock.suites():  # the suite and both pockets: Release files and index
        assert {f"{top}/dists/{suite}/{name}" for name in ("InRelease", "main/binary-amd64/Packages.xz")} <= set(files)
    debs = [path for path in files if path.endswith(".deb")]
    # and the suite's own ca-certificates, which debootstrap takes before the upgrade
    assert len(debs) == len(SMALL) + 1 and any(p.startswith("debian/pool/main/c/ca-certificates/") for p in debs)
    manifest.write(bundle, files)
    debian_part.check_against_locks([few], bundle, manifest.check(bundle))
    requests, apt_root = [], tmp_path / "apt"
    apt_root.mkdir(mode=0o755)
    with serve.serving(bundle, files, requests=requests) as url:
        sources = [(f"{url}/{top}", suite) for top, suite in lock.suites()]
        env = debian_resolve._private_apt(apt_root, sources, "amd64", ("main",))
        assert (
            f"signed-by={debian_resolve.KEYRING}] {url}/debian bookworm main" in (apt_root / "sources.list").read_text()
        )
        with open(apt_root / "apt.conf", "a") as conf:  # apt's own default: Translation-en too
            conf.write('#clear Acquire::Languages;\nAPT::Sandbox::User "root";\n')
        update = subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True, timeout=300)
        assert update.returncode == 0 and "Err:" not in update.stdout, update.stdout + update.stderr
        for package in few.packages:
            argv = ["apt-get", "download", f"{package.name}={package.version}"]
            got = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
            assert got.returncode == 0, got.stdout + got.stderr
            (deb,) = tmp_path.glob(f"{package.name}_*.deb")
            assert sha(deb.read_bytes()) == package.sha256
    asked = [path for _, path, _ in requests]
    assert any("/i18n/by-hash/SHA256/" in path for path in asked), asked  # Translation-en, by its hash
    assert [r for r in requests if r[2] != 200] == []
    # the bundle's Release files are Debian's: one changed is refused by the signature
    (bundle / "debian/dists/bookworm/InRelease").write_text("changed\n")
    with serve.serving(bundle / "debian", files, root=bundle) as url, pytest.raises(ToolError, match="InRelease"):
        debian_part.fetch_indexes([few], url, tmp_path / "again")


def test_a_pockets_fix_comes_with_the_suites_own_version_that_debootstrap_takes(mirror, tmp_path):
    fixed = ("hello", "2.10-3+s1", "amd64")
    security = write_suite(tmp_path / "security", f"{SUITE}-security", [fixed])
    packages = [DebPackage(*fixed, sha(deb_bytes(*fixed))), *(p for p in lock_of().packages if p.name != "hello")]
    lock = lock_of(packages=tuple(sorted(packages)), pockets=("security",))
    mirrors = {"debian": f"file:{mirror}", "debian-security": f"file:{security}"}
    files = debian_part.fetch_indexes([lock], mirrors, tmp_path / "bundle")
    files |= debian_part.fetch_debs([lock], mirrors, tmp_path / "bundle")
    assert files[f"debian-security/{filename(*fixed)}"] == sha(deb_bytes(*fixed))  # the locked fix
    own = f"debian/{filename('hello', '2.10-3', 'amd64')}"  # what debootstrap takes from the suite
    assert files[own] == sha(deb_bytes("hello", "2.10-3", "amd64"))
    assert f"debian-security/dists/{SUITE}-security/InRelease" not in files  # a test's: unsigned
    manifest.write(tmp_path / "bundle", files)
    debian_part.check_against_locks([lock], tmp_path / "bundle", manifest.check(tmp_path / "bundle"))
    (tmp_path / "bundle" / own).unlink()
    del files[own]
    with pytest.raises(ToolError, match=f"{own}: hello=2.10-3 of {LOCK_PATH} is not in the bundle"):
        debian_part.check_against_locks([lock], tmp_path / "bundle", files)


# sqv as Debian 13 ships it (the trixie login node of tests/images has it; this bookworm host's
# sqv 1.1 has no --cleartext): a stand-in that answers as it does, and records what it was asked
FAKE_SQV = """#!/bin/sh
echo "$@" >> "$SQV_CALLS"
while [ $# -gt 0 ]; do
    case "$1" in --output) out="$2"; shift ;; --cleartext) signed="$2"; shift ;; esac
    shift
done
if [ -n "${signed:-}" ]; then sed -n '/^Origin\\|^Suite\\|^Codename/p' "$signed" | head -c -1 > "$out"; fi
exit "${SQV_EXIT:-0}"
"""


@pytest.fixture
def sqv_alone(tmp_path, monkeypatch):
    """PATH with the stand-in sqv and no gpgv; the calls it gets, one line each."""
    folder = tmp_path / "sqv-bin"
    folder.mkdir()
    (folder / "sqv").write_text(FAKE_SQV)
    (folder / "sqv").chmod(0o755)
    found = shutil.which
    monkeypatch.setattr(release.shutil, "which", lambda name: None if name == "gpgv" else found(name))
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    monkeypatch.setenv("SQV_CALLS", str(tmp_path / "calls"))
    return tmp_path / "calls"


def test_sqv_checks_where_there_is_no_gpgv(sqv_alone, tmp_path, monkeypatch):
    keyring = tmp_path / "keyring.gpg"
    keyring.write_bytes(b"keys")
    release_text = b"Origin: Debian\nSuite: stable\nCodename: bookworm\n"
    got = {"InRelease": b"-----BEGIN PGP SIGNED MESSAGE-----\n" + release_text, "Release": release_text}
    got["Release.gpg"] = b"signature"
    release.verify(got, "http://m/dists/bookworm", keyring)
    inline, detached = sqv_alone.read_text().splitlines()
    assert inline.startswith(f"--keyring {keyring} --cleartext ") and " --output " in inline
    assert detached.startswith(f"--keyring {keyring} --signature-file ") and detached.endswith("/Release")
    monkeypatch.setenv("SQV_EXIT", "1")
    with pytest.raises(ToolError) as caught:
        release.verify(got, "http://m/dists/bookworm", keyring)
    assert str(caught.value) == f"http://m/dists/bookworm/InRelease: no good signature by a key of {keyring} (sqv)"


def test_neither_gpgv_nor_sqv_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(release.shutil, "which", lambda name: None)
    (tmp_path / "keyring.gpg").write_bytes(b"keys")
    with pytest.raises(ToolError, match=r"^neither gpgv nor sqv is on PATH to check http://m/InRelease; install"):
        release.verify({"InRelease": b"", "Release": b""}, "http://m", tmp_path / "keyring.gpg")


def _keyring_deb(tmp_path, keyring: bytes) -> Path:
    tree = tmp_path / "keyring-tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        "Package: debian-archive-keyring\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n"
    )
    (tree / release.IN_KEYRING_DEB).parent.mkdir(parents=True)
    (tree / release.IN_KEYRING_DEB).write_bytes(keyring)
    deb = tmp_path / "keyring.deb"
    subprocess.run(["dpkg-deb", "--build", "-Zgzip", str(tree), str(deb)], check=True, capture_output=True)
    return deb


def test_a_host_without_debians_keyring_checks_with_the_bundles_pinned_one(signed, tmp_path, monkeypatch):
    """A RHEL login node has no /usr/share/keyrings: the keyring .deb the bundle holds for the
    builder's own debootstrap serves, as its sha256 is the one the builder pins."""
    bundle = tmp_path / "bundle"
    with serve.serving(signed, {}) as url:
        files = make_bundle_from(url, bundle)
    deb = _keyring_deb(tmp_path, (tmp_path / "keyring.gpg").read_bytes())
    pool = "pool/main/d/debian-archive-keyring/debian-archive-keyring_1_all.deb"
    (bundle / "debian" / pool).parent.mkdir(parents=True)
    shutil.copy(deb, bundle / "debian" / pool)
    files[f"debian/{pool}"] = sha(deb.read_bytes())
    monkeypatch.setattr(release, "KEYRING", tmp_path / "no-such-keyring.gpg")
    monkeypatch.setitem(release.debootstrap_kit.PACKAGES, "debian-archive-keyring", (pool, sha(deb.read_bytes())))
    debian_part.check_against_locks([lock_of()], bundle, files)
    # a keyring .deb other than the pinned one is not trusted: the host's is asked for
    monkeypatch.setitem(release.debootstrap_kit.PACKAGES, "debian-archive-keyring", (pool, "0" * 64))
    with pytest.raises(ToolError, match=r"no-such-keyring\.gpg is missing, so .*/InRelease cannot be checked"):
        debian_part.check_against_locks([lock_of()], bundle, files)
