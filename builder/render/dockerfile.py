"""A user's Dockerfile read as the steps of one extra layer on top of a built image
(`hpcml extend`), with spython's Docker parser (pinned in pyproject.toml).

spython turns RUN, ENV, ARG, COPY, WORKDIR, LABEL, CMD and ENTRYPOINT into a Singularity
recipe's parts: the lines of %post in order, %environment, %files, %labels. What it cannot
turn into a working %post (USER becomes a bare `USER x` line, ADD of a URL a curl call the
image may lack, a second FROM a stage our layer cannot have, COPY --from another stage) is
refused first by our own scan of the instructions, naming the file and line. The FROM line
names nothing: the layer always starts from the target's built image.

Example: read(Path("project/Dockerfile")) -> DockerSteps(env=("HF_HOME=/scratch/hf",),
post=("export HF_HOME=/scratch/hf", "pip install einops==0.8.1"), files=(("train.py",
"/opt/train.py"),), labels=(("maintainer", "me"),), runscript=())
"""

import shlex
from dataclasses import dataclass
from pathlib import Path

from ..errors import RecipeError

TAKEN = {"FROM", "RUN", "ENV", "ARG", "COPY", "ADD", "WORKDIR", "LABEL", "CMD", "ENTRYPOINT"}
IGNORED = {"EXPOSE", "VOLUME", "MAINTAINER"}  # metadata an Apptainer image has no use for
WHY_NOT = {
    "USER": "Apptainer runs the container as the user who starts it",
    "SHELL": "the layer's steps run under /bin/sh, as Apptainer's %post does",
    "HEALTHCHECK": "Apptainer has no health checks",
    "ONBUILD": "an extra layer has no later builds to trigger",
    "STOPSIGNAL": "Apptainer stops a container as it stops any process",
}


@dataclass(frozen=True)
class DockerSteps:
    env: tuple  # NAME=VALUE as written, for %environment
    post: tuple  # %post lines in the Dockerfile's order (ENV and ARG exported for later RUNs)
    files: tuple  # (source relative to the Dockerfile's folder, destination in the image)
    labels: tuple  # (key, value)
    runscript: tuple  # the CMD/ENTRYPOINT as a runscript, or () to keep the image's own


def read(path: Path) -> DockerSteps:
    """The Dockerfile's steps; a step an extra layer cannot take is one located error."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        why = getattr(error, "strerror", None) or error
        raise RecipeError(f"cannot read the Dockerfile ({why})", file=str(path)) from None
    _scan(path, text)
    parser = _parsed(path)
    recipe = next(iter(parser.recipe.values()))
    # spython puts ENV and ARG assignments into the install lines unexported: export them, so
    # the RUN lines after them see the values, as Docker's do
    assignments = set(recipe.environ) | {f"{name}={value}" for name, value in parser.args.items()}
    lines = [line.rstrip("\n") for line in recipe.install]  # spython keeps comments (EXPOSE's too): left out
    post = tuple(f"export {line}" if line in assignments else line for line in lines if line and line[0] != "#")
    for source, _ in recipe.files:
        if Path(source).is_absolute() or ".." in Path(source).parts:
            raise RecipeError(f"COPY {source}: expected a path inside the Dockerfile's folder", file=str(path))
        if not (path.parent / source).exists():
            raise RecipeError(f"COPY {source}: no such file beside the Dockerfile", file=str(path))
    return DockerSteps(
        env=tuple(recipe.environ),
        post=post,
        files=tuple((source, dest) for source, dest in recipe.files),
        labels=tuple(pair for entry in recipe.labels for pair in _label_pairs(" ".join(entry))),
        runscript=_runscript(recipe),
    )


def _scan(path, text):
    """Refuse, by file and line, what the parser would turn into a broken layer."""
    froms = 0
    for number, line in _instructions(text):
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word in WHY_NOT:
            raise RecipeError(f"{word} is not taken in an extra layer: {WHY_NOT[word]}", file=str(path), line=number)
        if word not in TAKEN | IGNORED:
            raise RecipeError(
                f"{word}: not an instruction an extra layer takes (expected one of: {', '.join(sorted(TAKEN))})",
                file=str(path),
                line=number,
            )
        froms += word == "FROM"
        if froms > 1:
            raise RecipeError(
                "a second FROM: an extra layer is one stage on the target's image", file=str(path), line=number
            )
        if word == "ADD" and "://" in rest:
            raise RecipeError("ADD of a URL: fetch it in a RUN step instead", file=str(path), line=number)
        if word == "COPY" and rest.lstrip().startswith("--"):
            raise RecipeError(f"COPY {rest.split()[0]}: only plain COPY SOURCE... DEST", file=str(path), line=number)
        if word == "ARG" and "=" not in rest:
            raise RecipeError("ARG without a default: an extra layer takes no --build-arg", file=str(path), line=number)


def _instructions(text):
    """(first line number, instruction with its continuation lines joined), comments left out."""
    start, parts = None, []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not parts and (not line or line.startswith("#")):
            continue
        start = start or number
        parts.append(line[:-1] if line.endswith("\\") else line)
        if not line.endswith("\\"):
            yield start, " ".join(parts)
            start, parts = None, []
    if parts:
        yield start, " ".join(parts)


def _parsed(path):
    """spython's parser, having read the one stage; its warnings silenced (the scan above said
    what matters)."""
    from spython.logger import bot
    from spython.main.parse.parsers import DockerParser

    level, bot.level = bot.level, -3  # spython's ERROR: no warnings about paths relative to our cwd
    try:
        # load=False: the constructor would parse once and parse() again, doubling every step
        parser = DockerParser(str(path), load=False)
        parser.parse()
    finally:
        bot.level = level
    return parser


def _label_pairs(text):
    for word in shlex.split(text):
        key, _, value = word.partition("=")
        yield key, value


def _runscript(recipe):
    command = [*(recipe.entrypoint or []), *(recipe.cmd or [])]
    if isinstance(recipe.entrypoint, str) or isinstance(recipe.cmd, str):  # the shell form
        command = ["/bin/sh", "-c", " ".join(filter(None, [recipe.entrypoint or "", recipe.cmd or ""]))]
    if not command:
        return ()
    where = [f"cd {shlex.quote(recipe.workdir)}"] if recipe.workdir else []
    return (*where, "exec " + " ".join(shlex.quote(word) for word in command) + ' "$@"')
