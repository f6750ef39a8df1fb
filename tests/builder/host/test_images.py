"""Reading a built image's labels (what publish, list and show rely on) with the runner
swapped for a fake: the prefix dropped, the build's measurements picked, and an answer
without labels one clear error."""

import json

import pytest
from conftest import RECIPES
from helpers.fake_runner import FakeRunner

from builder.errors import ToolError
from builder.host import images
from builder.labels import LABEL_PREFIX, MEASURED
from builder.recipes.tree import RecipeTree


def inspect_answer(labels) -> str:
    return json.dumps({"data": {"attributes": {"labels": labels}}})


def test_labels_lose_their_project_prefix(monkeypatch):
    fake = FakeRunner(
        monkeypatch,
        answers={
            "apptainer": inspect_answer(
                {f"{LABEL_PREFIX}.version.torch": "2.13.0", "org.label-schema.build-date": "today"}
            )
        },
    )
    labels = images.read_labels("apptainer", "x.sif")
    assert labels.stripped == {"version.torch": "2.13.0", "org.label-schema.build-date": "today"}
    assert labels.short("version.torch") == "2.13.0" and labels.full[f"{LABEL_PREFIX}.version.torch"] == "2.13.0"
    assert fake.commands == [["apptainer", "inspect", "--json", "--labels", "x.sif"]]


@pytest.mark.parametrize("answer", ["not json", "[]", json.dumps({"data": {}}), inspect_answer(["a"]), "null"])
def test_an_answer_without_labels_is_one_clear_error(monkeypatch, answer):
    FakeRunner(monkeypatch, answers={"apptainer": answer})
    with pytest.raises(ToolError, match=r"^apptainer inspect gave no labels for x.sif$"):
        images.read_labels("apptainer", "x.sif")


def test_list_and_show_take_only_what_the_build_measured(monkeypatch, tmp_path):
    measured = sorted(MEASURED)[0]
    FakeRunner(
        monkeypatch,
        answers={
            "apptainer": inspect_answer({f"{LABEL_PREFIX}.{measured}": "2.27.3", f"{LABEL_PREFIX}.recipe": "{...}"})
        },
    )
    monkeypatch.setattr(images, "ready_apptainer", lambda site: "apptainer")
    target = RecipeTree(RECIPES).target("cpu")
    assert images.built_facts(target, tmp_path) == {}  # not built
    (tmp_path / "cpu.sif").write_bytes(b"an image")
    assert images.built_facts(target, tmp_path) == {"image": str(tmp_path / "cpu.sif"), measured: "2.27.3"}
