"""What `hpcml extend` builds: the plan of one more layer on a target's built image, made of
a user's Dockerfile's steps (dockerfile.read, spython) and rendered by definition.py, with
the files it copies. layerbuild.extend builds it as it builds a target's layers.

Example: plan_extension(tree, tree.target("cpu"), Path("project/Dockerfile"), "cpu-project")
-> Extension(plan=LayerPlan(layer="image", owner="cpu-project", ...), folder=Path("project"),
files=(("train.py", "/opt/project/"),))
"""

import re
from dataclasses import dataclass, replace
from pathlib import Path

from .. import contract
from ..errors import RecipeError
from ..recipes.target_model import Target
from ..values.shell import cmd
from . import dockerfile
from .blocks import build_host
from .definition import render_extension
from .parts import PYENV_TAR
from .plan import LayerPlan

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # the whole name: fullmatch (a $ would let "x\n" pass)


NO_STEPS = dockerfile.DockerSteps(env=(), post=(), files=(), labels=(), runscript=())


@dataclass(frozen=True)
class Extension:
    plan: LayerPlan  # owner: the new image's name; its %files read from CONTEXT beside the images
    folder: Path  # the Dockerfile's folder, where the files it copies are
    files: tuple  # (source relative to folder, destination in the image)
    pyenv: Path | None = None  # a project env's file (hpcml env build), unpacked into the context

    @property
    def context(self) -> str:
        """Where the build finds the copied files, relative to the images folder."""
        return context_name(self.plan.owner)


def context_name(name) -> str:
    return f"{name}.context"


# what the image's venv held before the steps, as `pip list --format=freeze` wrote it
BASE_PINS = "/tmp/hpcml-extend-base-pins.txt"
_MOVED = r"s/^pins: \([^:]*\): pinned \(.*\) by the layers below, found \(.*\)$/\1 \2 with \3/p"


def pin_guard(target: Target, source: str) -> tuple:
    """(%post lines before the steps, after them): the host's pip settings (CA bundle, indexes,
    wheels), as a build's own layers read them, and the image's distributions written down;
    after the steps, one marked line naming each that a step replaced, old and new version."""
    python = f"{target.python.venv}/bin/python"
    before = (
        *build_host.parts(target)[0].post,
        f"{python} -m pip list --format=freeze 2>/dev/null | grep -E '^[A-Za-z0-9._-]+==[^[:space:]]+$' > {BASE_PINS}",
    )
    said = f"{contract.FAILURE_MARKER}the steps of {source} replaced the image's "
    after = (
        f'if ! moved="$({python} -m smoke.pins {BASE_PINS} 2>&1)"; then',
        f"    moved=\"$(printf '%s\\n' \"$moved\" | sed -n {cmd(_MOVED)} | paste -sd ';' - | sed 's/;/; /g')\"",
        f'    echo {cmd(said)}"$moved; an image\'s pins stay: add packages it lacks, or use hpcml env" >&2',
        "    exit 1",
        "fi",
        cmd("rm", "-f", BASE_PINS),
    )
    return before, after


def with_pyenv(target: Target, steps):
    """The steps with a project env baked in first: its tar copied to the image's top (the
    context holds it: layerbuild/extend.py) and unpacked at its mount point, every Python of
    the image reading its site-packages (a .pth in the image's venv), its scripts first on PATH."""
    python, mount = f"{target.python.venv}/bin/python", contract.PYENV_MOUNT
    code = "import sys, sysconfig; open(sysconfig.get_path('purelib') + '/hpcml-pyenv.pth', 'w').write(sys.argv[1])"
    line = f"import site, sys; '{mount}/site-packages' in sys.path or site.addsitedir('{mount}/site-packages')\n"
    post = (
        cmd("mkdir", "-p", mount),
        cmd("tar", "-xf", f"/{PYENV_TAR}", "-C", mount),
        cmd("rm", "-f", f"/{PYENV_TAR}"),
        cmd(python, "-c", code, line),
    )
    return replace(
        steps,
        files=((PYENV_TAR, f"/{PYENV_TAR}"), *steps.files),
        post=(*post, *steps.post),
        env=(f"PATH={mount}/bin:$PATH", *steps.env),
    )


def plan_extension(tree, target: Target, path: Path | None, name=None, pyenv: Path | None = None) -> Extension:
    """The layer's plan: a Dockerfile's steps, a project env's file (pyenv), or both; a name
    that is not new, or a step the layer cannot take, is one line."""
    name = name or f"{target.name}-extended"
    if not NAME_RE.fullmatch(name) or name in tree.targets or name in tree.aliases:
        raise RecipeError(
            f"--name {name!r}: expected a new image name (letters, digits, '.', '_', '-'), not a target's",
            file="command line",
        )
    steps = dockerfile.read(path) if path else NO_STEPS
    source = Path(path or pyenv).name
    baked = with_pyenv(target, steps) if pyenv else steps
    plan = render_extension(target, name, baked, source, context_name(name), pin_guard(target, source))
    return Extension(plan, Path(path).parent if path else Path("."), steps.files, Path(pyenv) if pyenv else None)
