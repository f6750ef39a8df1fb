"""CONTRIBUTING.md's rule for commit subjects, held from the commit that wrote it down: at
most 72 characters, one line."""

import shutil
import subprocess

import pytest
from conftest import ROOT

LIMIT = 72


def git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=60)


def subjects_since_the_rule():
    """{commit: subject} from the commit that added CONTRIBUTING.md to HEAD."""
    if not shutil.which("git") or git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout: no history to read")
    added = git("log", "--diff-filter=A", "--format=%H", "--", "CONTRIBUTING.md").stdout.split()
    # not committed yet: the rule starts with the commit that adds it
    since = [f"{added[-1]}^..HEAD"] if added else ["-0"]
    lines = git("log", "--format=%h %s", *since).stdout.splitlines()
    return dict(line.split(" ", 1) for line in lines if " " in line)


def test_every_subject_since_the_rule_fits_72_characters():
    too_long = {commit: subject for commit, subject in subjects_since_the_rule().items() if len(subject) > LIMIT}
    assert not too_long, f"commit subjects over {LIMIT} characters (CONTRIBUTING.md): {too_long}"
