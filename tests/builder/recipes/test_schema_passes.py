"""Recipe data that passed its schema is not checked again; an error always is."""

import shutil

import pytest
from conftest import RECIPES

from builder.errors import RecipeError
from builder.recipes import schema_passes, validate
from builder.recipes.tree import RecipeTree


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty user cache, and the module's memory of the last one forgotten."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    schema_passes._known.cache_clear()
    schema_passes._new.clear()
    yield tmp_path / "cache" / "hpc-ml-containers" / "schema-passes"
    schema_passes._known.cache_clear()
    schema_passes._new.clear()


def forget():
    """As a new command starts: the stored keys read again."""
    schema_passes._known.cache_clear()


def counting(monkeypatch):
    runs = []
    real = validate.jsonschema_lazily

    def counted():
        runs.append(1)
        return real()

    monkeypatch.setattr(validate, "jsonschema_lazily", counted)
    return runs


def test_a_tree_that_passed_is_not_validated_again(cache, monkeypatch):
    runs = counting(monkeypatch)
    RecipeTree(RECIPES)
    first = len(runs)
    assert first >= 20  # every file and every merged target
    assert len(cache.read_text().split()) == first  # one write, every pass
    forget()
    RecipeTree(RECIPES)
    assert len(runs) == first


def test_a_file_changed_after_it_passed_is_checked_again_and_its_error_shown(cache, tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    RecipeTree(recipes)
    versions = recipes / "versions.yaml"
    versions.write_text(versions.read_text() + "\nnot_a_key: 1\n")
    forget()
    with pytest.raises(RecipeError, match="unknown key 'not_a_key'"):
        RecipeTree(recipes)
    forget()
    with pytest.raises(RecipeError, match="unknown key 'not_a_key'"):  # an error is never kept
        RecipeTree(recipes)


def test_the_key_tells_types_apart_and_follows_the_schema():
    keys = {
        schema_passes.key("schema", False, {"a": 1}),
        schema_passes.key("schema", False, {"a": "1"}),
        schema_passes.key("schema", False, {"a": True}),
        schema_passes.key("schema", False, {"a": "true"}),
        schema_passes.key("schema", False, {"a": 1.0}),
        schema_passes.key("schema", True, {"a": 1}),
        schema_passes.key("schema 2", False, {"a": 1}),
    }
    assert len(keys) == 7


def test_an_unreadable_or_unwritable_store_only_means_checking_again(cache, monkeypatch):
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"\xff\xfe not text")
    runs = counting(monkeypatch)
    RecipeTree(RECIPES)
    assert runs
    shutil.rmtree(cache.parent)
    cache.parent.write_text("a file where the cache folder should be\n")  # root ignores modes
    forget()
    runs.clear()
    RecipeTree(RECIPES)  # the write fails quietly
    assert runs and cache.parent.is_file()


def test_the_store_keeps_the_newest_keys(cache, monkeypatch):
    monkeypatch.setattr(schema_passes, "KEEP", 3)
    for number in range(5):
        schema_passes.remember(f"{number:064x}")
    schema_passes.save()
    assert cache.read_text().split() == [f"{number:064x}" for number in (2, 3, 4)]
