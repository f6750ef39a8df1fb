"""The one reader of a built image's labels (builder/labels.py): the JSON object that
/.singularity.d/labels.json holds and `apptainer inspect --json --labels` shows, its names as
the image writes them and the project's less their prefix; text that is not such an object is
one line naming the image."""

import json

import pytest

from builder.errors import ToolError
from builder.labels import BUILD_DATE, LABEL_PREFIX, ImageLabels

LABELS = {
    f"{LABEL_PREFIX}.version.torch": "2.13.0",
    BUILD_DATE: "Friday_27_November_2026_4:57:38_UTC",
    f"{LABEL_PREFIX}.recipe": json.dumps({"description": "CPU-only", "torch": {"flavour": "cpu"}}),
}


def test_a_json_object_of_labels_reads_as_the_image_writes_them():
    labels = ImageLabels.from_json_text(json.dumps(LABELS), "cpu.sif")
    assert labels.full == LABELS and list(labels.full) == sorted(LABELS)  # by name
    assert labels == ImageLabels.from_inspect(json.dumps({"data": {"attributes": {"labels": LABELS}}}), "x", "a")
    assert ImageLabels.from_json_text(json.dumps({"n": 1, "b": True}), "x").full == {"b": "True", "n": "1"}
    assert ImageLabels.from_json_text("", "cpu.sif").full == {}  # an image without labels


def test_the_projects_labels_lose_their_prefix_and_the_others_keep_their_names():
    labels = ImageLabels(LABELS)
    assert labels.short("version.torch") == "2.13.0" and labels.short("nccl.version") == ""
    assert labels.short(BUILD_DATE) == ""  # Apptainer's own is no short name of ours
    assert labels.stripped == {
        "version.torch": "2.13.0",
        BUILD_DATE: LABELS[BUILD_DATE],
        "recipe": LABELS[f"{LABEL_PREFIX}.recipe"],
    }
    assert labels.flavour == "cpu" and labels.recipe["description"] == "CPU-only"


@pytest.mark.parametrize(
    "recipe, parsed",
    [(None, {}), ("not json", {}), ("[1]", {}), (json.dumps({"torch": "cuda"}), {"torch": "cuda"})],
)
def test_a_missing_or_odd_recipe_is_no_flavour(recipe, parsed):
    labels = ImageLabels({} if recipe is None else {f"{LABEL_PREFIX}.recipe": recipe})
    assert labels.recipe == parsed and labels.flavour == ""


@pytest.mark.parametrize(
    "text, problem",
    [
        ("not json", "is not JSON"),
        ("{", "is not JSON"),
        ("[1, 2]", "is not a JSON object of labels"),
        ('"cpu"', "is not a JSON object of labels"),
        ("null", "is not a JSON object of labels"),
    ],
)
def test_text_that_is_no_json_object_is_one_line_naming_the_image(text, problem):
    with pytest.raises(ToolError) as raised:
        ImageLabels.from_json_text(text, "images/cpu.sif")
    assert str(raised.value) == f"images/cpu.sif: /.singularity.d/labels.json {problem}"


@pytest.mark.parametrize("text", ["not json", "{}", json.dumps({"data": {"attributes": {"labels": [1]}}})])
def test_an_inspect_answer_without_labels_is_one_line(text):
    with pytest.raises(ToolError, match=r"^apptainer inspect gave no labels for x.sif$"):
        ImageLabels.from_inspect(text, "x.sif", "apptainer")
