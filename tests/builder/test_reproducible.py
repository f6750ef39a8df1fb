"""builder/reproducible.py: every %post of every definition starts at the fixed build time
and hash seed and ends with the tidy step; the build date label is the fixed time's."""

import re
import subprocess

import pytest
from conftest import CONTAINERS

from builder import reproducible
from builder.layerbuild import host_settings


def test_a_stage_without_post_lines_gets_none():
    assert reproducible.stage_post("final", []) == []


def test_post_lines_sit_between_the_fixed_time_and_the_tidy_step():
    lines = reproducible.stage_post("final", ["apt-get update"])
    assert lines[:2] == [
        "umask 022",
        f"export SOURCE_DATE_EPOCH={reproducible.SOURCE_DATE_EPOCH} PYTHONHASHSEED=0 TZ=UTC LC_ALL=C.UTF-8",
    ]
    assert lines[2] == "apt-get update"
    assert lines[-2] == "echo '--- final: tidy'"
    assert "/var/log/dpkg.log" in lines[-1] and "/var/cache/ldconfig/aux-cache" in lines[-1]


@pytest.mark.parametrize("definition", sorted(CONTAINERS.glob("*.def")), ids=lambda p: p.name)
def test_every_post_of_every_definition_is_wrapped(definition):
    sections = re.findall(r"^%post\n(.*?)(?=^%|^Bootstrap:|\Z)", definition.read_text(), re.M | re.S)
    assert sections, definition.name
    for section in sections:
        lines = section.strip().splitlines()
        assert lines[1:3] == reproducible.stage_post("x", ["true"])[:2]
        tidy = next(i for i, line in enumerate(lines) if line.endswith(": tidy'"))
        forgetting = (*reproducible.FORGET_HOST, *reproducible.NEUTRAL_SOURCES)
        assert all(line in forgetting for line in lines[tidy + 1 : -1])
        assert lines[-1].startswith("rm -rf /var/log/apt/*.log")


def test_the_build_date_label_is_source_date_epochs_in_apptainers_form():
    """Go's "Monday_2_January_2006_15:4:5_MST", as `apptainer inspect --labels` shows it."""
    assert reproducible.build_date() == "Thursday_1_January_2026_0:0:0_UTC"


def test_only_a_shipped_debian_root_forgets_the_build_host(tree):
    """debootstrap writes the host's name and the build's mirror into the root; the image's last
    stage replaces them, the layers below keep apt's lines active with placeholders (the next
    layer's apt points them at its build's mirror: test below)."""
    for name in sorted(tree.target_docs):
        target = tree.target(name)
        debian = not target.site_image and target.stage("final").bootstrap == "debootstrap"
        for definition in sorted(CONTAINERS.glob(f"{target.name}*.def")):
            text = definition.read_text()
            forgets = [line in text for line in reproducible.FORGET_HOST]
            shipped = definition.name == f"{target.name}.def"
            assert forgets == [shipped and debian] * len(forgets), definition.name
            assert (reproducible.NEUTRAL_SOURCES[0] in text) == (debian and not shipped), definition.name
            if shipped and debian:
                tidy = text[text.rindex("--- final: tidy'") :]
                assert tidy.index(reproducible.FORGET_HOST[0]) < tidy.index("rm -rf /var/log/apt/*.log")


def test_a_lower_layers_placeholders_become_the_next_builds_mirrors(tmp_path):
    """Real sed: the mirrors of the build that made a lower layer go (NEUTRAL_SOURCES), and the
    next layer's build puts its own back (host_settings.apt_lines), security lines apart."""
    sources = tmp_path / "sources.list"
    sources.write_text(
        "deb http://127.0.0.1:42499/debian bookworm main\n"
        "deb http://127.0.0.1:42499/debian-security bookworm-security main\n"
    )
    neutral = reproducible.NEUTRAL_SOURCES[0].replace("/etc/apt/sources.list", str(sources))
    subprocess.run(["sh", "-c", neutral], check=True, timeout=30)
    assert sources.read_text() == (
        f"deb {reproducible.MIRROR_PLACEHOLDER} bookworm main\n"
        f"deb {reproducible.SECURITY_PLACEHOLDER} bookworm-security main\n"
    )
    (line,) = host_settings.apt_lines(
        "http://mirror.example/debian", "http://security.example/debian-security", sources
    )
    subprocess.run(["sh", "-c", line], check=True, timeout=30)
    assert sources.read_text() == (
        "deb http://mirror.example/debian bookworm main\n"
        "deb http://security.example/debian-security bookworm-security main\n"
    )
