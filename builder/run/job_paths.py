"""The paths a job script names: made absolute when the script is written, since the job runs
wherever it is submitted from; checked where the host can see them. `p` is the
jobscript.Plan being made; ``p.request.folder`` is the folder relative paths are from ("" keeps
them as given)."""

import os
import re
from pathlib import Path

from ..errors import RecipeError, ToolError
from ..host.images import Built, checked_labels, ready_apptainer
from ..invocation import program as builder_command
from ..shell import leading_variable, path_value, quote

# What users type first (`-- python train.py`): every launch already starts python itself.
PYTHON = re.compile(r"^python(3(\.\d+)?)?$")


def _error(message):
    return RecipeError(message, file="command line")


def absolute(path: str, folder: str) -> str:
    """``path`` from ``folder``; one that starts with a variable ($SINGULARITY_ALLOWED_DIR/x.sif)
    is expanded when the job runs, and kept as it is."""
    if not path or not folder or leading_variable(path):
        return path
    return os.path.normpath(os.path.join(folder, os.path.expanduser(path)))


def program(p) -> list:
    """The program after --, without a leading python (noted in the plan's reasons), its
    script named by its absolute path."""
    words = list(p.request.program)
    if words and PYTHON.match(words[0]):
        dropped = [words.pop(0)]
        if words[:1] == ["-u"]:  # output is unbuffered anyway (PYTHONUNBUFFERED)
            dropped.append(words.pop(0))
        if words and words[0].startswith("-") and words[0] != "-m":
            raise _error(
                f"python option {words[0]} after --: the job starts python itself; "
                f"give the script or -m MODULE first, e.g. -- train.py --epochs 10"
            )
        p.notes.append(f"dropped {' '.join(dropped)!r} after --: each launch starts python itself")
    if not words:
        raise _error("no program: give it after --, e.g. -- train.py --epochs 10")
    words[0] = _script(words[0], p.request.folder)
    return words


def _script(word: str, folder: str) -> str:
    """A script's path, absolute, refused when it is not there. Only a word that looks like a
    path (a slash, or .py) is one: `-m MODULE` and a bare name may be found inside the image,
    which the host cannot look into."""
    if not folder or word.startswith("-") or not ("/" in word or word.endswith(".py")):
        return word
    path = absolute(word, folder)
    if not os.path.exists(path):
        raise _error(
            f"program {word}: no such file ({path}); give your script's path, or -m MODULE for a module in the image"
        )
    return path


def data_paths(values, folder) -> list:
    """--bind SRC[:DST[:OPTS]] and --stage DIR values, each source absolute from ``folder``
    (the job runs wherever it is submitted); the container side stays as given."""
    return [":".join([absolute(source, folder), *rest]) for source, *rest in (v.split(":", 1) for v in values)]


def check_image(p):
    """An image named by --image that this host can read answers for the target, as smoke and
    publish ask of theirs: one of this builder's built as another target is refused. One it did
    not make (a site's own, a stand-in) is noted; where no Apptainer runs here, so is that."""
    if not p.request.image or leading_variable(p.image) or not os.path.isfile(p.image):
        return
    try:
        labels = checked_labels(ready_apptainer(p.site), Built(p.target, p.site, Path(p.image)), foreign=True)
    except ToolError as error:
        p.notes.append(f"--image {p.request.image}: its labels were not read ({error}); not checked")
        return
    if "target" not in labels:
        p.notes.append(f"--image {p.request.image}: not built by this builder; not checked against {p.target.name}")


def image_hint(p) -> str:
    """What the script says when the image is not where it looks: what puts it there on the site,
    as shell words for echo, quoted; the image folder's variable expands when the job runs."""
    if p.record and not p.request.image:
        return quote(f"(the module {p.record['name']}/{p.record['version']} sets it)")
    if p.site.runtime.image_dir:
        copy = f": {p.site.runtime.image_copy} {p.target.name}.sif" if p.site.runtime.image_copy else ""
        return f"{quote('(copy it into')} {path_value(p.site.runtime.image_dir)}{quote(f' first{copy})')}"
    name = p.target.name
    return quote(
        f"(copy the {name} image there first, made by: {builder_command()} build {name}; "
        "or write the script again with jobscript --image PATH)"
    )


def variable_checks(p) -> list:
    """Script lines that stop the job in one line of its own when the variable the image's
    path starts with is unset (set -u would end it with bash's `unbound variable`)."""
    name = leading_variable(p.image)
    if not name:
        return []
    # no $ in the text: single quotes keep it from expanding, and shellcheck would ask why
    inside = p.image.partition("/")[2] or "file"
    message = f"error: {name} is not set, and the image {inside} is looked for in that folder; "
    message += f"submit the job from a login shell of {p.site.name}"
    return [f'if [ -z "${{{name}:-}}" ]; then', f"    echo {quote(message)} >&2", "    exit 2", "fi"]
