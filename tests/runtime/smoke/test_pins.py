"""smoke.pins: the image's %test that no pin of the layers below moved under the frameworks.
(The frameworks block's real-pip test, tests/builder/render/test_frameworks_pins.py, runs it
in a venv; these are its readings, without pip.)"""

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import pins  # noqa: E402


def test_names_compare_as_pip_compares_them():
    assert pins.pinned(["NumPy==2.4.6\n", "typing_extensions==4.15.0", "", "not-a-pin\n"]) == {
        "numpy": "2.4.6",
        "typing-extensions": "4.15.0",
    }


def test_each_moved_or_missing_pin_is_one_line():
    pinned = {"numpy": "2.4.6", "torch": "2.13.0+cpu", "six": "1.17.0"}
    found = {"numpy": "2.5.0", "torch": "2.13.0+cpu"}
    assert pins.moved(pinned, found) == [
        "pins: numpy: pinned 2.4.6 by the layers below, found 2.5.0",
        "pins: six: pinned 1.17.0 by the layers below, found none",
    ]
    assert pins.moved(pinned, dict(pinned)) == []


def test_this_pythons_own_packages_hold_and_a_bad_file_is_a_usage_error(tmp_path, capsys):
    held = tmp_path / "constraints.txt"
    held.write_text("".join(f"{name}=={version}\n" for name, version in sorted(pins.installed().items())))
    assert pins.main([str(held)]) == 0
    assert capsys.readouterr().out.endswith(" pins of the layers below unmoved\n")
    moved = tmp_path / "moved.txt"
    moved.write_text("pytest==0.0.1\n")
    assert pins.main([str(moved)]) == 1
    assert "pins: pytest: pinned 0.0.1 by the layers below, found " in capsys.readouterr().err
    assert pins.main([str(tmp_path / "missing.txt")]) == 2
    assert pins.main([]) == 2
