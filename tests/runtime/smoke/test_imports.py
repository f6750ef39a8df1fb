"""smoke.imports, the frameworks' %test check: each pinned module imports and is that release."""

import os
import subprocess
import sys

from conftest import ROOT


def run(*pins, path=()):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "runtime"), *map(str, path)]))
    return subprocess.run(
        [sys.executable, "-m", "smoke.imports", *pins], env=env, capture_output=True, text=True, timeout=60
    )


def packages(tmp_path):
    (tmp_path / "goodpkg").mkdir()
    (tmp_path / "goodpkg" / "__init__.py").write_text("__version__ = '2.6.6'\n")
    (tmp_path / "brokenpkg.py").write_text("import no_such_dependency_anywhere\n__version__ = '1.0'\n")
    return tmp_path


def test_the_pinned_release_passes(tmp_path):
    done = run("goodpkg==2.6.6", path=[packages(tmp_path)])
    assert done.returncode == 0, done.stderr
    assert done.stdout == "imports: goodpkg 2.6.6\n"


def test_another_release_fails_naming_both(tmp_path):
    done = run("goodpkg==2.6.6", "goodpkg==2.7.0", path=[packages(tmp_path)])
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == "imports: goodpkg is 2.6.6, expected 2.7.0\n"


def test_a_module_that_breaks_on_import_fails_with_its_reason(tmp_path):
    done = run("goodpkg==2.6.6", "brokenpkg==1.0", path=[packages(tmp_path)])
    assert done.returncode == 1
    assert done.stderr.startswith("imports: brokenpkg does not import: ModuleNotFoundError:")
    assert "Traceback" not in done.stderr


def test_no_pins_is_bad_usage():
    done = run()
    assert done.returncode == 2 and done.stderr.startswith("imports: error: expected NAME==VERSION")
