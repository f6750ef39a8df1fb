"""Property (issue 65): the EDF that `hpcml export --format edf` writes (builder/export/edf.py,
TOML for the CSCS Container Engine) gives every value back unchanged to Python's own TOML
reader (tomllib), with nothing added: the image path (--image-path, through export's own check,
or the squashfs's path here), the image's environment (names and values, `$` doubled for the
Engine's expansion) and the hook's annotations; the comments, which name the target, the build
date and the image's CUDA runtime, carry no raw text, and no character that would not print as
itself reaches the file raw."""

import json
import tomllib

from helpers.awkward_text import assert_caught, assert_refused, text
from helpers.property_share import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from builder.errors import RecipeError
from builder.export import edf, write
from builder.export.metadata import ImageMetadata
from builder.labels import LABEL_PREFIX, ImageLabels

inputs = st.fixed_dictionaries(
    {
        "image_path": st.one_of(text, text.map(lambda path: "/" + path), text.map(lambda path: "${SCRATCH}" + path)),
        "given_path": st.booleans(),  # --image-path, else the squashfs's own path
        "target": text,
        "build_date": st.one_of(text, st.just("Friday_27_November_2026_4:57:38_UTC")),
        "flavour": st.one_of(st.sampled_from(["cpu", "cuda", "rocm"]), text),
        "runtime": st.one_of(st.sampled_from(["12.8", "13.0", ""]), text),
        "environment": st.dictionaries(text, text, max_size=4),
    }
)
AWKWARD = "a\nb\r\nc \"q\" 's' $HOME ${X} $$ [x] {y} \\ \x00\x08\x0c\x1a\x1b\x7f\x85\u2028 # = \U0001f600\\"
FIXED = {
    "image_path": "${SCRATCH}/images/" + AWKWARD,
    "given_path": False,
    "target": AWKWARD,
    "build_date": "Friday_27_November_2026_4:57:38_UTC",
    "flavour": "cuda",
    "runtime": "13.0\n[env]\nLD_PRELOAD = 'x'",
    "environment": {"PATH": "/opt/venv/bin:/bin", "ODD": AWKWARD, AWKWARD: "1", "with.dot": "", "": "empty"},
}


def metadata_of(given) -> ImageMetadata:
    recipe = json.dumps({"torch": {"flavour": given["flavour"]}})
    labels = {"org.label-schema.build-date": given["build_date"], f"{LABEL_PREFIX}.recipe": recipe}
    labels[f"{LABEL_PREFIX}.cuda.runtime"] = given["runtime"]
    return ImageMetadata(given["target"], dict(given["environment"]), ImageLabels(labels))


def nested(annotations: dict) -> dict:
    """{"a.b.c": v} as TOML reads the dotted keys: {"a": {"b": {"c": v}}}."""
    tree = {}
    for name, value in annotations.items():
        *parents, last = name.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return tree


@settings(max_examples=examples(150), deadline=None, database=None)
@given(given=inputs)
@example(given=FIXED)
@example(given={**FIXED, "given_path": True})
def test_the_edf_gives_each_value_back(given):
    if given["given_path"]:
        image = given["image_path"]
        try:
            write.check_image_path(image)  # export's own check of --image-path, before anything
        except RecipeError as error:
            assert_refused(error, image)
            return
    else:
        image = edf.literal(given["image_path"])  # the squashfs's path here, as export writes it
    meta = metadata_of(given)
    written = edf.text(meta, image)
    parsed = tomllib.loads(written)
    hook = edf.annotations(meta)
    expected = {"image": image, "workdir": edf.WORKDIR, "mounts": list(edf.MOUNTS)}
    expected["env"] = {name: edf.literal(value) for name, value in meta.environment.items()}
    if hook:
        expected["annotations"] = nested(hook)
    assert parsed == expected  # each value back, nothing added
    assert all(value.replace("$$", "$") == given["environment"][name] for name, value in parsed["env"].items())
    # no character that does not print, raw; no value added a line (a comment's end)
    assert written.endswith("\n")
    lines = written[:-1].split("\n")
    assert all(line.isprintable() for line in lines), "a character that does not print, raw"
    comments = 5 + (2 if hook else 0)
    assert sum(line.startswith("#") for line in lines) == comments
    # image, workdir, mounts, [env] and its lines, [annotations] and its lines, 1 or 2 blank lines
    assert len(lines) == comments + 4 + len(meta.environment) + (len(hook) + 3 if hook else 1)


# --- the property catches a real slip ----------------------------------------------------------


def test_a_naive_quote_is_caught(monkeypatch):
    monkeypatch.setattr(edf.toml, "string", lambda value: f'"{value}"')
    assert_caught(test_the_edf_gives_each_value_back, AssertionError, tomllib.TOMLDecodeError)


def test_raw_text_in_a_comment_is_caught(monkeypatch):
    monkeypatch.setattr(edf, "comment", lambda value: value)
    assert_caught(test_the_edf_gives_each_value_back, AssertionError, tomllib.TOMLDecodeError)
