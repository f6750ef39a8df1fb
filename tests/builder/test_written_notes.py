"""Property (issue 65): CHANGES.txt, the release notes publish writes beside a version
(builder/publish/release_notes.py), is plain text for people and for publish's summary, which
reads its last line. Every value in it (the module's name and version, through publish's own
check; the earlier version's folder; each Python distribution's and Debian package's name,
version and architecture and each image fact, from the two SBOMs) stays on its own line: no
character that would not print as itself reaches the file (each is escaped, as
`values.check.comment()` does), so no value starts or hides a line."""

import atexit
import shutil
import tempfile
from pathlib import Path

from helpers.awkward_text import assert_caught, assert_refused, plain_or, text
from helpers.property_share import examples
from helpers.sbom_docs import KEY
from helpers.sbom_docs import write as write_sbom
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from builder.errors import RecipeError
from builder.publish import install, release_notes
from builder.sbom import PUBLISHED, diff
from builder.values.check import comment

NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,12}"
FOLDER = Path(tempfile.mkdtemp(prefix="hpcml-written-notes-"))
atexit.register(shutil.rmtree, FOLDER, ignore_errors=True)

packages = st.dictionaries(text, text, max_size=3)
debs = st.lists(st.tuples(text, text, st.one_of(st.sampled_from(["amd64", "all", "arm64"]), text)), max_size=3)
facts = st.fixed_dictionaries({"target": text, "arch": text, "layer-key": st.one_of(st.just(KEY), text)})
inputs = st.fixed_dictionaries(
    {
        "name": plain_or(NAME),
        "version": plain_or(NAME),
        "before": st.one_of(st.none(), plain_or(NAME)),  # the earlier version's folder, if any
        "old": st.fixed_dictionaries({"dists": packages, "debs": debs, "facts": facts}),
        "new": st.fixed_dictionaries({"dists": packages, "debs": debs, "facts": facts}),
        "broken": st.booleans(),  # the earlier SBOM unreadable
    }
)
AWKWARD = 'a\nb\r\nc "q" $HOME [x] \\ \x00\x1a\x1b\x7f\x85\u2028\u2029\x0b\x0c\x1c \U0001f600'
FIXED = {
    "name": "pytorch",
    "version": "2.0",
    "before": "1.0\n2 changes",
    "old": {"dists": {"numpy": "1.0\n", AWKWARD: "1"}, "debs": [("bash", "5.2", "amd64")], "facts": {"target": "cpu"}},
    "new": {"dists": {"numpy": AWKWARD}, "debs": [("bash\n", "5\r", "amd64\x85")], "facts": {"target": AWKWARD}},
    "broken": False,
}


def _published(folder: Path, changes: dict, broken: bool):
    write_sbom(folder / PUBLISHED, **changes)
    if broken:
        (folder / PUBLISHED).write_text("{" + AWKWARD)
    (folder / "publish.json").write_text('{"published": "2026-10-01T10:00:00+0000"}')


@settings(max_examples=examples(120), deadline=None, database=None)
@given(given=inputs)
@example(given=FIXED)
@example(given={**FIXED, "broken": True})
@example(given={**FIXED, "before": None, "name": "pytorch\n"})
def test_each_value_stays_on_its_own_line(given):
    name, version, before = given["name"], given["version"], given["before"]
    try:
        install._check_names(name, version)  # publish's own check, before anything is written
    except RecipeError as error:
        assert_refused(error, name if error.message.startswith("--name ") else version)
        return
    assume(before != version)
    case = Path(tempfile.mkdtemp(dir=FOLDER))
    name_folder, staging = case / "prefix" / name, case / "staging"
    staging.mkdir()
    if before is not None:
        # a folder of its own in name_folder, which previous() takes for a version
        assume(before.strip(".") and "/" not in before and not before.startswith("."))
        try:
            (name_folder / before).mkdir(parents=True)
        except (OSError, ValueError):  # no folder can be named so
            assume(False)
        _published(name_folder / before, given["old"], given["broken"])
    new_sbom = write_sbom(case / "new.sbom.json", **given["new"])
    last = release_notes.write(staging, new_sbom, name_folder, version)

    written = (staging / release_notes.CHANGES).read_text()
    assert written.endswith("\n")
    lines = written[:-1].split("\n")
    assert all(line.isprintable() for line in lines), "a character that does not print, raw"
    assert written.splitlines() == lines  # nothing else that Python reads as a line's end
    assert release_notes.summary(staging) == last == (lines[-1] if before is not None else written.strip())
    assert lines[0].startswith(f"Changes in {name}/{version}")
    if before is None or given["broken"]:
        assert len(lines) == 1
        return
    assert lines[0] == f"Changes in {name}/{version} since {comment(before)} (hpcml diff):"
    old, new = diff.load(str(name_folder / before)), diff.load(new_sbom)
    sections = diff.compare(old, new)
    headers = [lines[i] for i in (1, 2) if i < len(lines) - 1 and lines[i].startswith(("A: ", "B: "))]
    # one line per change: each value, escaped, on the line of its change and on no other
    body = [section.title for section in sections] + [f"  {comment(line)}" for s in sections for line in s.lines]
    assert sorted(lines[1 + len(headers) : -1]) == sorted(body)
    count = sum(len(section.lines) for section in sections)
    assert lines[-1] == (f"{count} change{'' if count == 1 else 's'}" if count else "no differences")


# --- the property catches a real slip ----------------------------------------------------------


def test_raw_values_are_caught(monkeypatch):
    monkeypatch.setattr(release_notes, "comment", lambda value: value)
    assert_caught(test_each_value_stays_on_its_own_line, AssertionError)
