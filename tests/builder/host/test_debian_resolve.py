"""locking.debian: the host's real apt-get resolves against a small file: mirror written here
(no network); one `full` test resolves bookworm from the host's Debian mirror for real."""

import email.utils
import hashlib
import re
import time
from pathlib import Path

import pytest

from builder.errors import RecipeError, ToolError
from builder.host import debian_resolve as debian
from builder.host import hostinfo
from builder.lockfile import DebPackage

SUITE = "testing-suite"  # the fake mirror's: no rule of a real suite applies

# apt is not required here, so that only MINBASE_EXTRA brings it; hello recommends unused
PACKAGES = {
    "amd64": """\
Package: base-files
Version: 12.4+deb12u5
Architecture: amd64
Priority: required
Essential: yes

Package: dash
Version: 1:0.5.12-2
Architecture: amd64
Priority: required
Depends: libc6 (>= 2.36)

Package: libc6
Version: 2.36-9+deb12u7
Architecture: amd64
Priority: optional
Depends: libgcc-s1

Package: libgcc-s1
Version: 12.2.0-14
Architecture: amd64
Priority: optional
Depends: libc6 (>= 2.35)

Package: apt
Version: 2.6.1
Architecture: amd64
Priority: important
Depends: libc6

Package: hello
Version: 2.10-3
Architecture: amd64
Priority: optional
Depends: hello-data (= 2.10-3)
Recommends: unused

Package: hello-data
Version: 2.10-3
Architecture: all
Priority: optional

Package: unused
Version: 1.0
Architecture: amd64
Priority: optional
""",
    "arm64": """\
Package: base-files
Version: 12.4+deb12u5
Architecture: arm64
Priority: required

Package: apt
Version: 2.6.1
Architecture: arm64
Priority: required
""",
}


def deb_sha256(name: str, arch: str) -> str:
    """The SHA256 the fake index gives the .deb of ``name`` (no .deb is there to hash)."""
    return hashlib.sha256(f"{name}_{arch}.deb".encode()).hexdigest()


@pytest.fixture
def mirror(tmp_path) -> str:
    """A file: mirror of SUITE with main for amd64 and arm64; no .deb files: apt only simulates."""
    return write_mirror(tmp_path)


def write_mirror(tmp_path, unhashed=()) -> str:
    """The mirror; the stanzas of ``unhashed`` (names) give no SHA256."""
    write_suite(tmp_path / "mirror", SUITE, PACKAGES, unhashed)
    return f"file:{tmp_path / 'mirror'}"


def write_suite(root, suite, packages, unhashed=()) -> None:
    """Suite ``suite`` of the mirror at ``root``: main's Packages of each {arch: stanzas}."""
    dists = root / "dists" / suite
    sums = []
    for arch, text in packages.items():
        stanzas = text.split("\n\n")
        # each stanza names a .deb, its size and sha256, as a real index does
        text = "\n".join(
            f"{s.rstrip()}\nFilename: pool/main/{s.split()[1]}_{arch}.deb\nSize: 1000\n"
            + ("" if s.split()[1] in unhashed else f"SHA256: {deb_sha256(s.split()[1], arch)}\n")
            for s in stanzas
        )
        index = dists / "main" / f"binary-{arch}" / "Packages"
        index.parent.mkdir(parents=True)
        index.write_text(text)
        data = index.read_bytes()
        sums.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} main/binary-{arch}/Packages")
    (dists / "Release").write_text(
        f"Suite: {suite}\nCodename: {suite}\nDate: {email.utils.formatdate(usegmt=True)}\n"
        f"Architectures: {' '.join(packages)}\nComponents: main\nSHA256:\n" + "\n".join(sums) + "\n"
    )


def test_resolve_is_minbase_plus_the_asked_packages_and_their_depends(mirror, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    found = debian.resolve(SUITE, "amd64", mirror, ["hello"], workdir=work)
    assert [f"{p.name}={p.version} {p.arch}" for p in found] == [
        "apt=2.6.1 amd64",  # minbase's own addition to Priority: required
        "base-files=12.4+deb12u5 amd64",
        "dash=1:0.5.12-2 amd64",
        "hello=2.10-3 amd64",
        "hello-data=2.10-3 all",
        "libc6=2.36-9+deb12u7 amd64",  # optional, but a required package depends on it
        "libgcc-s1=12.2.0-14 amd64",  # a cycle with libc6: apt's Inst line ends in " []"
    ]  # not `unused`: hello only recommends it
    assert list(work.iterdir()) == []  # the private apt state is gone


def test_resolve_gives_each_package_the_sha256_of_its_packages_stanza(mirror):
    found = {p.name: p for p in debian.resolve(SUITE, "amd64", mirror, ["hello"])}
    # hello-data is Architecture: all in binary-amd64's index: its stanza's hash, not another's
    assert found["hello-data"].sha256 == deb_sha256("hello-data", "amd64")
    assert found["libc6"].line() == f"libc6=2.36-9+deb12u7 amd64 sha256:{deb_sha256('libc6', 'amd64')}"
    assert len({p.sha256 for p in found.values()}) == len(found)


def test_a_package_the_index_gives_no_sha256_for_is_one_line_naming_it(tmp_path):
    mirror = write_mirror(tmp_path, unhashed={"hello-data"})
    with pytest.raises(ToolError) as caught:
        debian.resolve(SUITE, "amd64", mirror, ["hello"])
    message = str(caught.value)
    assert message == f"the Packages index of {SUITE} amd64 from {mirror} gives no SHA256 for: hello-data=2.10-3 all"
    assert debian.resolve(SUITE, "amd64", mirror, [])  # a root without hello-data needs no hash of it


def test_resolve_reads_only_the_asked_architecture(mirror):
    found = debian.resolve(SUITE, "arm64", mirror, [])
    assert found == (
        DebPackage("apt", "2.6.1", "arm64", deb_sha256("apt", "arm64")),
        DebPackage("base-files", "12.4+deb12u5", "arm64", deb_sha256("base-files", "arm64")),
    )


def test_unknown_packages_are_named_in_one_line(mirror):
    with pytest.raises(ToolError) as caught:
        debian.resolve(SUITE, "amd64", mirror, ["hello", "no-such-package", "nor-this"])
    message = str(caught.value)
    assert "no-such-package, nor-this" in message and mirror in message and "\n" not in message


def test_a_mirror_that_is_not_there_fails_in_one_line(tmp_path):
    missing = f"file:{tmp_path / 'nowhere'}"
    with pytest.raises(ToolError) as caught:
        debian.resolve(SUITE, "amd64", missing, ["hello"])
    message = str(caught.value)
    assert message.startswith(f"apt-get update: no index for amd64 of {SUITE} from {missing}: ")
    assert "File not found" in message and "\n" not in message


def test_a_suite_the_mirror_lacks_fails_in_one_line(mirror):
    with pytest.raises(
        ToolError, match=r"^apt-get update: no index for amd64 of trixie from .*dists/trixie/"
    ) as caught:
        debian.resolve("trixie", "amd64", mirror, [])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "suite, arch, mirror, name, expected",
    [
        ('bookworm"', "amd64", "file:/m", "bash", "Debian suite"),
        ("bookworm", "i386", "file:/m", "bash", "Debian architecture 'i386': expected one of amd64, arm64"),
        ("bookworm", "amd64", "ftp://m", "bash", "Debian mirror"),
        ("bookworm", "amd64", "file:/m", "-o", "Debian package name '-o'"),
    ],
)
def test_bad_input_is_refused_before_apt_runs(suite, arch, mirror, name, expected):
    with pytest.raises(RecipeError, match=expected):
        debian.resolve(suite, arch, mirror, [name])


def test_format_and_parse_lines_round_trip():
    packages = [DebPackage("zlib1g", "1:1.2.13.dfsg-1", "amd64", "ab" * 32), DebPackage("adduser", "3.134", "all")]
    text = debian.format(packages)
    # adduser as an old lock line, without the sha256: still read, as ""
    assert text == f"adduser=3.134 all\nzlib1g=1:1.2.13.dfsg-1 amd64 sha256:{'ab' * 32}\n"
    assert debian.parse_lines(text, "lock.txt") == tuple(sorted(packages))
    assert debian.parse_lines("# header\n\n" + text, "lock.txt") == tuple(sorted(packages))
    assert debian.parse_lines(text, "lock.txt")[1].sha256 == "ab" * 32
    assert debian.format([]) == ""


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "bash 5.2.15-2 amd64",
            "lock.txt:2: expected 'NAME=VERSION ARCH sha256:HEX' (ARCH amd64, arm64 or all), found 'bash 5",
        ),
        ("bash=5.2.15-2 i386", "lock.txt:2: expected 'NAME=VERSION ARCH sha256:HEX'"),
        ("bash=5.2.15-2 amd64 ", "lock.txt:2: expected 'NAME=VERSION ARCH sha256:HEX'"),
        ("bash=5.2.15-2 amd64 sha256:" + "a" * 63, "lock.txt:2: expected 'NAME=VERSION ARCH sha256:HEX'"),
        ("bash=5.2.15-2 amd64 sha256:" + "A" * 64, "lock.txt:2: expected 'NAME=VERSION ARCH sha256:HEX'"),
        ("bash=5.2.15-2 amd64 " + "a" * 64, "lock.txt:2: expected 'NAME=VERSION ARCH sha256:HEX'"),
        ("adduser=3.134 all", "lock.txt:2: adduser listed twice (first at line 1)"),
    ],
)
def test_parse_lines_names_the_bad_line(line, expected):
    with pytest.raises(RecipeError) as caught:
        debian.parse_lines(f"adduser=3.134 all\n{line}\n", "lock.txt")
    assert str(caught.value).startswith(expected) and "\n" not in str(caught.value)


# The network: the host's Debian mirror, as the builder finds it (about 4 s here)
@pytest.mark.tools
def test_resolve_bookworm_from_the_host_mirror(tmp_path):
    start = time.monotonic()
    mirror = hostinfo.debian_mirror()
    found = debian.resolve(
        "bookworm", "amd64", mirror, ["python3", "openmpi-bin"], exclude=debian.APPTAINER_EXCLUDES, workdir=tmp_path
    )
    by_name = {p.name: p for p in found}
    # as Apptainer's debootstrap makes a bookworm root: usr-is-merged, not usrmerge and its perl
    assert "usr-is-merged" in by_name and not {"usrmerge", "perl", "e2fsprogs"} & by_name.keys()
    assert len(found) > 100, f"{len(found)} packages in {time.monotonic() - start:.1f} s"
    assert by_name["python3"].version.startswith("3.11")
    assert {"apt", "bash", "libc6", "openmpi-bin"} <= by_name.keys()
    assert {p.arch for p in found} == {"amd64", "all"}
    assert all(re.fullmatch("[0-9a-f]{64}", p.sha256) for p in found)
    assert debian.parse_lines(debian.format(found), "lock") == found
    assert list(Path(tmp_path).iterdir()) == []


def test_the_pockets_bring_their_versions_but_no_required_package_of_their_own(mirror, tmp_path):
    # updates: a newer hello; security, from a mirror of its own: a newer dash, and a
    # required package debootstrap never sees (it reads the suite's own index)
    write_suite(
        tmp_path / "mirror",
        f"{SUITE}-updates",
        {
            "amd64": "Package: hello\nVersion: 2.10-3+u1\n"
            "Architecture: amd64\nPriority: optional\nDepends: hello-data (= 2.10-3)"
        },
    )
    security = tmp_path / "security"
    write_suite(
        security,
        f"{SUITE}-security",
        {
            "amd64": "Package: dash\nVersion: 1:0.5.12-2+s1\n"
            "Architecture: amd64\nPriority: required\n\nPackage: newreq\nVersion: 1\n"
            "Architecture: amd64\nPriority: required"
        },
    )
    found = debian.resolve(
        SUITE, "amd64", mirror, ["hello"], pockets=("updates", "security"), security_mirror=f"file:{security}"
    )
    versions = {p.name: p.version for p in found}
    assert versions["hello"] == "2.10-3+u1" and versions["dash"] == "1:0.5.12-2+s1"
    assert "newreq" not in versions
    assert found[[p.name for p in found].index("dash")].sha256 == deb_sha256("dash", "amd64")


def test_a_pocket_the_mirror_lacks_fails_in_one_line(mirror, tmp_path):
    with pytest.raises(ToolError) as caught:
        debian.resolve(SUITE, "amd64", mirror, [], pockets=("security",), security_mirror=f"file:{tmp_path}/none")
    message = str(caught.value)
    assert f"{SUITE}-security from file:{tmp_path}/none" in message and "\n" not in message
