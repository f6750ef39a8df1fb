"""The paths a job script names: made absolute when the script is written, since the job runs
wherever it is submitted from; checked where the host can see them. One pass, `paths_for`,
returns the program's and the data's; the image's is the environment's (job_environment.py),
checked here. ``request.folder`` is the folder relative paths are from ("" keeps them as
given)."""

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolError
from ..host import pyenv_file
from ..host.images import Built, checked_labels
from ..host.which_apptainer import ready_apptainer
from ..invocation import program as builder_command
from ..recipes.site_model import Site
from ..recipes.target_model import Target
from ..values.shell import leading_variable, path_value, quote
from .job_request import Request, command_line_error

# What users type first (`-- python train.py`): every launch already starts python itself.
PYTHON = re.compile(r"^python(3(\.\d+)?)?$")


@dataclass(frozen=True)
class Paths:
    """The program and the data a job names, their host paths absolute."""

    program: tuple[str, ...]  # after --, without a leading python
    binds: tuple[str, ...] = ()  # SING_BIND's entries (--bind)
    stage: tuple[str, ...] = ()  # SING_STAGE's entries (--stage)
    notes: tuple[str, ...] = ()  # said on stderr: what was changed in the request


def paths_for(request: Request) -> Paths:
    """The program after -- and the --bind and --stage values, as the script names them."""
    program, notes = _program(request)
    return Paths(
        program=program,
        binds=data_paths(request.binds, request.folder),
        stage=data_paths(request.stage, request.folder),
        notes=notes,
    )


def absolute(path: str, folder: str) -> str:
    """``path`` from ``folder``; one that starts with a variable ($SINGULARITY_ALLOWED_DIR/x.sif)
    is expanded when the job runs, and kept as it is."""
    if not path or not folder or leading_variable(path):
        return path
    return os.path.normpath(os.path.join(folder, os.path.expanduser(path)))


def _program(request: Request) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the program after --, without a leading python, its script named by its absolute path;
    the note that says a python was dropped)."""
    words, notes = list(request.program), ()
    if words and PYTHON.match(words[0]):
        dropped = [words.pop(0)]
        if words[:1] == ["-u"]:  # output is unbuffered anyway (PYTHONUNBUFFERED)
            dropped.append(words.pop(0))
        if words and words[0].startswith("-") and words[0] != "-m":
            raise command_line_error(
                f"python option {words[0]} after --: the job starts python itself; "
                f"give the script or -m MODULE first, e.g. -- train.py --epochs 10"
            )
        notes = (f"dropped {' '.join(dropped)!r} after --: each launch starts python itself",)
    if not words:
        raise command_line_error("no program: give it after --, e.g. -- train.py --epochs 10")
    words[0] = _script(words[0], request.folder)
    return tuple(words), notes


def _script(word: str, folder: str) -> str:
    """A script's path, absolute, refused when it is not there. Only a word that looks like a
    path (a slash, or .py) is one: `-m MODULE` and a bare name may be found inside the image,
    which the host cannot look into."""
    if not folder or word.startswith("-") or not ("/" in word or word.endswith(".py")):
        return word
    path = absolute(word, folder)
    if not os.path.exists(path):
        raise command_line_error(
            f"program {word}: no such file ({path}); give your script's path, or -m MODULE for a module in the image"
        )
    return path


def data_paths(values: tuple[str, ...], folder: str) -> tuple[str, ...]:
    """--bind SRC[:DST[:OPTS]] and --stage DIR values, each source absolute from ``folder``
    (the job runs wherever it is submitted); the container side stays as given."""
    return tuple(":".join([absolute(source, folder), *rest]) for source, *rest in (v.split(":", 1) for v in values))


def pyenv_path(target: Target, request: Request):
    """(SING_PYENV, why, notes): --pyenv by its absolute path, checked to be an env of the
    target's image where this host can read it (one that starts with a variable: at run time)."""
    if not request.pyenv:
        return "", (), ()
    path = absolute(request.pyenv, request.folder)
    notes = () if leading_variable(path) else pyenv_file.check_for(Path(path), target, "--pyenv")
    why = (f"SING_PYENV: your project env {path} (--pyenv), bound and activated by the wrapper",)
    return path, why, notes


def check_image(asked: str, image: str, site: Site, target: Target) -> tuple[str, ...]:
    """Notes on ``image`` (SING_IMAGE) when it was named by --image (``asked``) and this host
    can read it: it must answer for the target, as smoke and publish ask of theirs, and one of
    this builder's built as another target is refused. One it did not make (a site's own, a
    stand-in) is noted; where no Apptainer runs here, so is that."""
    if not asked or leading_variable(image) or not os.path.isfile(image):
        return ()
    try:
        labels = checked_labels(ready_apptainer(site), Built(target, site, Path(image)), foreign=True)
    except ToolError as error:
        return (f"--image {asked}: its labels were not read ({error}); not checked",)
    if "target" not in labels:
        return (f"--image {asked}: not built by this builder; not checked against {target.name}",)
    return ()


def image_hint(site: Site, target: Target, module: str) -> str:
    """What the script says when the image is not where it looks: what puts it there on the site
    (``module``: the published module that sets it, "" when none does), as shell words for
    echo, quoted; the image folder's variable expands when the job runs."""
    if module:
        return quote(f"(the module {module} sets it)")
    if site.runtime.image_dir:
        copy = f": {site.runtime.image_copy} {target.name}.sif" if site.runtime.image_copy else ""
        return f"{quote('(copy it into')} {path_value(site.runtime.image_dir)}{quote(f' first{copy})')}"
    name = target.name
    return quote(
        f"(copy the {name} image there first, made by: {builder_command()} build {name}; "
        "or write the script again with jobscript --image PATH)"
    )


def variable_checks(image: str, site: Site, what: str = "the image") -> tuple[str, ...]:
    """Script lines that stop the job in one line of its own when the variable the image's
    path (or ``what`` else's) starts with is unset (set -u would end it with bash's `unbound
    variable`)."""
    name = leading_variable(image)
    if not name:
        return ()
    # no $ in the text: single quotes keep it from expanding, and shellcheck would ask why
    inside = image.partition("/")[2] or "file"
    message = f"error: {name} is not set, and {what} {inside} is looked for in that folder; "
    message += f"submit the job from a login shell of {site.name}"
    return (f'if [ -z "${{{name}:-}}" ]; then', f"    echo {quote(message)} >&2", "    exit 2", "fi")
