"""Every pin in recipes/versions.yaml and every versioned fact in a site file says where it
comes from and when that was read: a comment with a date (2026-11 or 2026-11-28), or the word
"unverified" where no source could be read. The next review of the pins then starts from the
sources, not from memory.

A comment speaks for a line when it is on that line, or heads the run of sibling lines the
line is in (a comment block at the line's own indentation, above it, up to a blank line), or
speaks so for one of the line's parents (the mapping keys above it, by indentation).
"""

import re

import pytest
from conftest import ROOT

DATED = re.compile(r"\b20\d\d-\d\d\b")
# a value naming a release (2.13.0, 4.1) or a dated file (..._20260929_...)
VERSIONED = re.compile(r"\b\d+\.\d+(\.\d+)?\b|[-_]20\d{6}")
# a mapping key with no value of its own: its children are the pins
HEADER = re.compile(r'^\s*[\w."-]+:\s*(#.*)?$')


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def _is_comment(line):
    return line.lstrip().startswith("#")


def _trailing(line):
    found = re.search(r"\s#\s(.*)$", line)
    return found.group(1) if found and not _is_comment(line) else ""


def _heading(lines, i):
    """(the comment block heading line i's siblings or "", the index of line i's parent or None)."""
    depth, j, block = _indent(lines[i]), i - 1, []
    while j >= 0:
        line = lines[j]
        if not line.strip():
            return "\n".join(block), None
        if _is_comment(line) and _indent(line) == depth and not block:
            while j >= 0 and _is_comment(lines[j]) and _indent(lines[j]) == depth:
                block.append(lines[j])
                j -= 1
            continue
        if not _is_comment(line) and _indent(line) < depth:
            return "\n".join(block), j
        j -= 1
    return "\n".join(block), None


def speaking_for(lines, i) -> str:
    """Every comment that speaks for line ``i``."""
    said = [_trailing(lines[i])]
    while i is not None:
        block, parent = _heading(lines, i)
        said.append(block)
        if parent is not None:
            said.append(_trailing(lines[parent]))
        i = parent
    return "\n".join(said)


def sourced(text) -> bool:
    return bool(DATED.search(text)) or "unverified" in text.lower()


def unsourced(text, is_pin) -> list:
    lines = text.splitlines()
    return [
        f"{n + 1}: {line.strip()}"
        for n, line in enumerate(lines)
        if line.strip() and not _is_comment(line) and is_pin(line) and not sourced(speaking_for(lines, n))
    ]


def versions_pin(line):
    """Every value below a top-level key, but mapping headers, git URLs and submodules."""
    return (
        _indent(line) > 0
        and not HEADER.match(line)
        and not re.match(r"\s*(git|modules/[\w-]+):", line)
        and "description:" not in line
    )


def site_pin(line):
    """A site fact that names a release or a dated file. Not the measured figures (allreduce's
    busbw_gbs entries), which carry a source: field of their own."""
    key, _, value = line.split(" #", 1)[0].partition(":")
    figure = "busbw_gbs" in line or "source:" in line
    return bool(VERSIONED.search(value)) and key.strip() != "description" and not figure


def test_every_pin_in_versions_yaml_has_a_dated_source():
    text = (ROOT / "recipes" / "versions.yaml").read_text()
    assert unsourced(text, versions_pin) == []


@pytest.mark.parametrize("site", sorted(p.stem for p in (ROOT / "recipes" / "sites").glob("*.yaml")))
def test_every_versioned_site_fact_has_a_dated_source(site):
    text = (ROOT / "recipes" / "sites" / f"{site}.yaml").read_text()
    assert unsourced(text, site_pin) == []


# --- the rule itself, on small files ----------------------------------------------------------


def test_a_pin_without_a_comment_is_named_with_its_line():
    text = "python_packages:\n  numpy: 2.4.6\n  torch: 2.13.0  # PyPI, read 2026-11-28\n"
    assert unsourced(text, versions_pin) == ["2: numpy: 2.4.6"]


def test_a_comment_without_a_date_is_no_source():
    text = "python_packages:\n  # from PyPI\n  numpy: 2.4.6\n"
    assert unsourced(text, versions_pin) == ["3: numpy: 2.4.6"]


def test_a_heading_comment_speaks_for_its_siblings_up_to_a_blank_line():
    text = (
        "# read at PyPI on 2026-11-28\n"
        "python_packages:\n"
        "  numpy: 2.4.6\n"
        "  ninja: 1.13.0\n"
        "\n"
        "frameworks:\n"
        "  lightning: 2.6.6\n"
    )
    assert unsourced(text, versions_pin) == ["7: lightning: 2.6.6"]


def test_a_nested_pin_takes_its_parents_source_and_unverified_counts():
    text = (
        "sources:\n"
        "  libfabric:  # LAIF's variables, read 2026-11-28\n"
        "    version: 2.1\n"
        "    commit: 78d6e031bd644b3dd5215a4b138a4bf193c15dfe\n"
        "  mpich:\n"
        "    version: 5.0.1  # unverified\n"
        "    commit: f47d175fffa7ac9aecd912079be6bdb723c8e706\n"
    )
    assert unsourced(text, versions_pin) == ["7: commit: f47d175fffa7ac9aecd912079be6bdb723c8e706"]


def test_a_site_fact_naming_a_release_needs_a_source_but_figures_with_source_fields_do_not():
    text = (
        "mpi:\n"
        "  abi: openmpi\n"
        "  host: OpenMPI 4.1\n"
        "allreduce:\n"
        '  - {nodes: 2, busbw_gbs: 66.5, source: "cscs-reframe-tests"}\n'
    )
    assert unsourced(text, site_pin) == ["3: host: OpenMPI 4.1"]
