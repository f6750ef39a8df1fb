"""A kept step's output carries the sha256 list of what it saved, and a later build checks it
before putting the output back: the rendered step's lines run here in plain sh, with a folder
of tmp_path standing in for the builder's mount. A changed or missing file, or a missing list,
stops the build with one marked line (contract.FAILURE_MARKER) that names it and the way out."""

import subprocess

from builder.layerbuild.build_log import failure_line
from builder.render import parts
from builder.render.definition import _kept_step
from builder.render.parts import KEPT_SUMS, Kept

STEP = Kept(
    name="probe",
    build=('mkdir -p "$made/sub" && echo one > "$made/a.txt" && echo two > "$made/sub/b.txt"', "echo compiled"),
    save=('cp -a "$made/." "$kept/"',),
    restore=('cp "$kept/a.txt" "$kept/sub/b.txt" "$back/"',),
)


def run_step(tmp_path, kept=STEP):
    """The step's rendered lines under `sh -e`, as %post runs them; the kept folder in tmp_path."""
    folder, lines = _kept_step(kept, ["the inputs"])
    assert lines[0].startswith(f"kept={parts.KEPT_MOUNT}/{folder}")
    store = tmp_path / "kept" / folder
    store.mkdir(parents=True, exist_ok=True)
    script = "\n".join([f"made={tmp_path / 'made'}", f"back={tmp_path / 'back'}", f"kept={store}", *lines[1:]])
    (tmp_path / "back").mkdir(exist_ok=True)
    done = subprocess.run(["sh", "-e", "-c", script], capture_output=True, text=True, timeout=60)
    return done, store


def test_the_saved_output_lists_each_file_by_its_relative_name_and_is_put_back_after_its_check(tmp_path):
    first, store = run_step(tmp_path)
    assert first.returncode == 0 and "compiled" in first.stdout, first.stderr
    listed = sorted(line.split("  ", 1)[1] for line in (store / KEPT_SUMS).read_text().splitlines())
    assert listed == ["./a.txt", "./sub/b.txt"]  # not the list itself, nor the mark
    assert (store / "complete").is_file()
    second, _ = run_step(tmp_path)
    assert second.returncode == 0, second.stderr
    assert "reusing probe" in second.stdout and "compiled" not in second.stdout
    assert (tmp_path / "back" / "b.txt").read_text() == "two\n"


def test_a_kept_file_changed_since_stops_the_build_with_one_line_naming_it(tmp_path):
    _, store = run_step(tmp_path)
    (store / "sub" / "b.txt").write_text("not what was compiled\n")
    done, _ = run_step(tmp_path)
    assert done.returncode == 1 and not (tmp_path / "back" / "a.txt").exists()
    reason = failure_line(done.stderr)
    assert len([line for line in done.stderr.splitlines() if line.startswith("hpcml-error")]) == 1
    assert f"the kept output {store.name} is not what its step saved (./sub/b.txt: FAILED" in reason
    assert "remove that folder from kept/ in the builder's cache" in reason and "build again" in reason


def test_a_kept_output_without_its_list_or_a_file_stops_the_build(tmp_path):
    _, store = run_step(tmp_path)
    (store / "a.txt").unlink()
    done, _ = run_step(tmp_path)
    assert done.returncode == 1 and "./a.txt: FAILED open or read" in failure_line(done.stderr)
    (store / KEPT_SUMS).unlink()
    done, _ = run_step(tmp_path)
    assert done.returncode == 1 and f"{KEPT_SUMS}: No such file" in failure_line(done.stderr)


def test_the_folder_name_covers_the_check_so_an_output_kept_before_it_is_never_looked_for(monkeypatch):
    """An output kept before the list existed (no SHA256SUMS) sits under the old name: the step
    runs again instead of failing on the missing list."""
    folder, _ = _kept_step(STEP, ["the inputs"])
    monkeypatch.setattr(parts, "CHECK_SUMS", "true")
    assert _kept_step(STEP, ["the inputs"])[0] != folder
    monkeypatch.undo()
    monkeypatch.setattr(parts, "SAVE_SUMS", "true")
    assert _kept_step(STEP, ["the inputs"])[0] != folder
