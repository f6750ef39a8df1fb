"""Reading recipe files: libyaml (fast) and PyYAML's own parser give the same data and lines."""

import pytest
import yaml
from conftest import RECIPES

from builder.recipes import yamlsrc

FILES = sorted(RECIPES.rglob("*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(RECIPES)) for p in FILES])
def test_both_parsers_give_the_same_data_and_lines(path, monkeypatch):
    fast = yamlsrc.load(path, path.name)
    monkeypatch.setattr(yaml, "CSafeLoader", None)
    plain = yamlsrc.load(path, path.name)
    assert (fast.data, fast.lines) == (plain.data, plain.lines)


def test_libyaml_is_there_to_be_used():
    assert yaml.__with_libyaml__, "PyYAML without libyaml: every recipe load takes the slow parser"
