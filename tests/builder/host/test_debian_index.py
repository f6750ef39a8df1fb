"""host/debian_index.py: the downloaded Packages index read as apt wrote it: each package's
sha256 from its own stanza (the right version, the right architecture, not a Description
line that looks like a field), and Priority: required of one component only."""

import pytest

from builder.errors import ToolError
from builder.host import debian_index
from builder.lockfile import DebPackage

A, B, C = "a" * 64, "b" * 64, "c" * 64
MAIN = f"""\
Package: bash
Version: 5.2.15-2+b7
Architecture: amd64
Priority: required
SHA256: {A}
Description: GNU Bourne Again SHell
 SHA256: {C}

Package: bash
Version: 5.2.15-2+b8
Architecture: amd64
Priority: required
SHA256: {B}

Package: tzdata
Version: 2025b-0+deb12u1
Architecture: all
Priority: optional
SHA256: {C}
"""
CONTRIB = f"""\
Package: fonts-x
Version: 1.0
Architecture: all
Priority: required
SHA256: {B}"""  # no blank line after the last stanza


@pytest.fixture
def lists(tmp_path):
    (tmp_path / "mirror_dists_bookworm_main_binary-amd64_Packages").write_text(MAIN)
    (tmp_path / "mirror_dists_bookworm_contrib_binary-amd64_Packages").write_text(CONTRIB)
    # a pocket's required package: debootstrap reads the suite's own index only
    (tmp_path / "mirror_dists_bookworm-security_main_binary-amd64_Packages").write_text(
        "Package: newreq\nVersion: 1\nArchitecture: amd64\nPriority: required\n"
    )
    (tmp_path / "mirror_dists_bookworm_InRelease").write_text(f"SHA256:\n {A} 1 main/binary-amd64/Packages\n")
    return tmp_path


def test_each_package_takes_the_sha256_of_its_own_version_in_any_component(lists):
    asked = [DebPackage("tzdata", "2025b-0+deb12u1", "all"), DebPackage("bash", "5.2.15-2+b7", "amd64")]
    found = debian_index.hashed([*asked, DebPackage("fonts-x", "1.0", "all")], lists, "bookworm")
    assert found == (
        DebPackage("bash", "5.2.15-2+b7", "amd64", A),  # not the +b8 stanza's, nor its Description's
        DebPackage("fonts-x", "1.0", "all", B),  # contrib's index, its last stanza
        DebPackage("tzdata", "2025b-0+deb12u1", "all", C),
    )


def test_a_package_the_index_has_not_at_that_version_or_architecture_is_one_line(lists):
    asked = [DebPackage("bash", "5.2.15-2+b9", "amd64"), DebPackage("tzdata", "2025b-0+deb12u1", "arm64")]
    with pytest.raises(ToolError) as caught:
        debian_index.hashed(asked, lists, "bookworm amd64 from http://m")
    assert str(caught.value) == (
        "the Packages index of bookworm amd64 from http://m gives no SHA256 for: "
        "bash=5.2.15-2+b9 amd64, tzdata=2025b-0+deb12u1 arm64"
    )


def test_a_sha256_that_is_not_64_lower_case_hex_digits_is_none(tmp_path):
    (tmp_path / "x_main_binary-amd64_Packages").write_text(
        f"Package: bash\nVersion: 1\nArchitecture: amd64\nSHA256: {'A' * 64}\n"
    )
    with pytest.raises(ToolError, match="gives no SHA256 for: bash=1 amd64$"):
        debian_index.hashed([DebPackage("bash", "1", "amd64")], tmp_path, "bookworm")


def test_required_reads_the_component_asked_for_only(lists):
    assert debian_index.required(lists, "bookworm", "main") == ["bash"]
    assert debian_index.required(lists, "bookworm", "contrib") == ["fonts-x"]
