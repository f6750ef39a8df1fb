"""What a value may hold in an Apptainer definition, checked as Apptainer reads it back:
(apptainer's pkg/build/types/parser/deffile.go and internal/pkg/build/args/reader.go): a line
whose first word starts with % starts a section and one that starts with `Bootstrap:` a stage;
`{{ NAME }}` anywhere outside a comment is replaced with a build argument, and nothing escapes
it; a %labels line is split at its first space and both halves trimmed; a header line ends at
its first #; a %files line splits at whitespace. So a value that must stay on one line and
holds a control character, a label, path or image that would not read back as itself, and a
`{{ NAME }}` in a value are refused in one line (RecipeError) before anything is written;
environment values are shell-quoted (shell.export), comments escaped (check.comment).
"""

import re

from ..errors import RecipeError, shown
from .check import VARIABLE_EXPECTED, VARIABLE_NAME, single_line
from .check import field as checked_field
from .shell import export

# What apptainer build replaces with a build argument ({{ DEVEL }}): Go's \s and \w are ASCII
BUILD_ARG = re.compile(r"{{[ \t\n\f\r]*([0-9A-Za-z_]+)[ \t\n\f\r]*}}")
# In a value that expands when the container starts (shell.env_value): ${NAME}, ${NAME:-default}
_EXPANSION = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[A-Za-z0-9_./:@%+,=-]*)?\}")
# A stage's image: a docker reference, a Debian suite or a SIF path. No space (a header value is
# trimmed), # (it starts a comment there) or shell character (a debootstrap line names it).
IMAGE = r"[A-Za-z0-9/][A-Za-z0-9_.:/@+-]*"
IMAGE_EXPECTED = "an image reference, Debian suite or path: letters, digits and _ . : / @ + -"
LABEL_NAME = r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]*"
LABEL_EXPECTED = "a label name: letters, digits and _ . : / @ + -, starting with a letter or digit"
_STAGE_START = re.compile(r"bootstrap:", re.IGNORECASE)  # as Go's (?i) matches, K and ſ too
SECTIONS = ("setup", "environment", "post", "test", "runscript", "labels", "help")  # in stage.def.j2's order


def build_arg(name: str) -> str:
    """How a definition names a value given at build time (apptainer build --build-arg):
    build_arg("DEVEL") -> "{{ DEVEL }}"."""
    return "{{ " + name + " }}"


def line_value(value, what, where) -> str:
    """``value`` as text for one line of a definition; refused in one line when it holds a
    control character or a {{ NAME }} that apptainer build would replace."""
    text = single_line(str(value), what, where)
    if BUILD_ARG.search(text):
        raise RecipeError(
            f"{what} {shown(text)}: holds {{{{ NAME }}}}, which apptainer build would replace with a build argument",
            file=where,
        )
    return text


def label_line(key, value, where) -> str:
    """A %labels line that Apptainer reads back as ``key`` with ``value``."""
    checked_field(key, "label", LABEL_NAME, LABEL_EXPECTED, where)
    text = line_value(value, f"label {key}", where)
    if text != text.strip():
        raise RecipeError(
            f"label {key} {shown(text)}: expected no space at either end (Apptainer trims it)", file=where
        )
    return f"{key} {text}"


def export_line(name, value, where) -> str:
    """``export NAME=VALUE`` for %environment or %post: the value quoted (shell.export), each
    ${NAME} or ${NAME:-default} in it expanded when the line runs, and nothing else."""
    checked_field(name, "variable", VARIABLE_NAME, VARIABLE_EXPECTED, where)
    text = line_value(value, name, where)
    if "${" in _EXPANSION.sub("", text):
        raise RecipeError(
            f"{name} {shown(text)}: expected each ${{ to start ${{NAME}} or ${{NAME:-default}} (letters, digits "
            "and _ . / : @ % + , = -), expanded when the container starts",
            file=where,
        )
    return export(name, text)


def _file_path(path, stage, where) -> str:
    """A %files path as Apptainer splits the line: one word, a {{ NAME }} the stage declares."""
    text = single_line(str(path), "%files path", where)
    if any(name not in stage.args for name in BUILD_ARG.findall(text)):
        raise RecipeError(f"%files path {shown(text)}: holds a {{{{ NAME }}}} that is no build argument", file=where)
    bare = BUILD_ARG.sub("", text)
    if not text or any(c.isspace() or c in "\"'" for c in bare) or (bare != text and ("{" in bare or "}" in bare)):
        raise RecipeError(f"%files path {shown(text)}: expected a path without spaces or quotes", file=where)
    return text


def check_stage(stage, where):
    """Refuse, in one line, a stage whose text Apptainer would read otherwise than it is meant:
    a header value that is not one word, a %files path with a space or quote, a line that
    starts a section or a stage, a carriage return or NUL (Apptainer drops the one, sh stops
    at the other), a {{ NAME }} for no build argument the stage declares."""
    if stage.image and stage.image not in {build_arg(arg) for arg in stage.args}:
        checked_field(stage.image, f"stage {stage.name}: image", IMAGE, IMAGE_EXPECTED, where)
    for source, dest in stage.files:
        _file_path(source, stage, where), _file_path(dest, stage, where)
    for kind in SECTIONS:
        for line in (line for item in getattr(stage, kind) for line in str(item).split("\n")):
            why = ""
            if line.lstrip().startswith("%"):
                why = "its first word starts with %, which starts a section"
            elif _STAGE_START.match(line):
                why = "it starts with Bootstrap:, which starts a stage"
            elif "\r" in line or "\0" in line:
                why = "it holds a carriage return or NUL"
            elif any(name not in stage.args for name in BUILD_ARG.findall(line)):
                why = "it holds a {{ NAME }} that apptainer build would replace"
            if why:
                raise RecipeError(f"a line of %{kind} in stage {stage.name}, {shown(line)}: {why}", file=where)


def docker_env(assignment, where) -> str:
    """A Dockerfile's ENV as spython writes it (NAME=VALUE, the value as the Dockerfile quotes
    it) for %environment: refused when sh would run part of it, where Docker keeps it as text."""
    name, _, value = assignment.partition("=")
    checked_field(name, "ENV", VARIABLE_NAME, VARIABLE_EXPECTED, where)
    line_value(assignment, f"ENV {name}", where)
    if "$(" in value or "`" in value:
        raise RecipeError(
            f"ENV {name} {shown(value)}: holds $( or `, which Docker keeps as text and the image's "
            "shell would run at every start; set it in a RUN step",
            file=where,
        )
    return f"export {assignment}"


def check_target(target, where):
    """The target's own values that reach a definition: its description, and the images its
    stages start from."""
    line_value(target.description, "description", where)
    if target.site_image:  # both stages start from it
        checked_field(target.site_image.path, "site_image.path", IMAGE, IMAGE_EXPECTED, where)
    for stage in target.stages:
        checked_field(stage.image, f"stages.{stage.name}.image", IMAGE, IMAGE_EXPECTED, where)


def check_steps(steps, where):
    """A Dockerfile's shell lines and paths, as they are, but for a {{ NAME }} that apptainer
    build would replace."""
    for line in (*steps.post, *steps.runscript, *(path for pair in steps.files for path in pair)):
        if BUILD_ARG.search(line):
            raise RecipeError(
                f"{shown(line)}: holds {{{{ NAME }}}}, which apptainer build would replace with a build argument",
                file=where,
            )
