"""publish/release_notes.py: CHANGES.txt, `hpcml diff` between the version of a name
published last and the one being published, on SBOMs shaped as document.render writes them."""

import json

from helpers.sbom_docs import DISTS, write

from builder.publish import release_notes
from builder.sbom import PUBLISHED


def _published(name_folder, version, when, **changes):
    folder = name_folder / version
    write(folder / PUBLISHED, **changes)
    (folder / "publish.json").write_text(json.dumps({"published": when}))
    return folder


def test_the_first_version_of_a_name_says_so(tmp_path):
    staging, name = tmp_path / "staging", tmp_path / "prefix" / "pytorch"
    staging.mkdir()
    new = write(tmp_path / "new.sbom.json")
    line = release_notes.write(staging, new, name, "1.0")
    assert "the first published version of pytorch" in line
    assert (staging / "CHANGES.txt").read_text().startswith("Changes in pytorch/1.0: the first")


def test_the_notes_compare_with_the_version_published_last(tmp_path):
    staging, name = tmp_path / "staging", tmp_path / "prefix" / "pytorch"
    staging.mkdir()
    _published(name, "2.0", "2026-11-02T10:00:00+0000", dists={**DISTS, "numpy": "2.4.5"})
    _published(name, "1.0", "2026-10-01T10:00:00+0000", dists={**DISTS, "numpy": "1.0"})
    (name / ".3.0.partial-x").mkdir()  # an unfinished publish is no version
    new = write(tmp_path / "new.sbom.json")
    line = release_notes.write(staging, new, name, "3.0")
    text = (staging / "CHANGES.txt").read_text()
    assert text.startswith("Changes in pytorch/3.0 since 2.0 (hpcml diff):")
    assert "changed  numpy 2.4.5 -> 2.4.6" in text and "1.0" not in text.split("\n", 1)[1]
    assert line == "1 change"


def test_an_unreadable_earlier_sbom_does_not_stop_a_publish(tmp_path):
    staging, name = tmp_path / "staging", tmp_path / "prefix" / "pytorch"
    staging.mkdir()
    old = _published(name, "1.0", "2026-10-01T10:00:00+0000")
    (old / PUBLISHED).write_text("not json")
    line = release_notes.write(staging, write(tmp_path / "new.sbom.json"), name, "2.0")
    assert line.startswith("Changes in pytorch/2.0 since 1.0: not compared (")
