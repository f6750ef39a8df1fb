"""What `hpcml extend` builds: the plan of one more layer on a target's built image, made of
a user's Dockerfile's steps (dockerfile.read, spython) and rendered by definition.py, with
the files it copies. layerbuild.extend builds it as it builds a target's layers.

Example: plan_extension(tree, tree.target("cpu"), Path("project/Dockerfile"), "cpu-project")
-> Extension(plan=LayerPlan(layer="image", owner="cpu-project", ...), folder=Path("project"),
files=(("train.py", "/opt/project/"),))
"""

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import RecipeError
from ..recipes.target_model import Target
from . import dockerfile
from .definition import render_extension
from .plan import LayerPlan

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # the whole name: fullmatch (a $ would let "x\n" pass)


@dataclass(frozen=True)
class Extension:
    plan: LayerPlan  # owner: the new image's name; its %files read from CONTEXT beside the images
    folder: Path  # the Dockerfile's folder, where the files it copies are
    files: tuple  # (source relative to folder, destination in the image)

    @property
    def context(self) -> str:
        """Where the build finds the copied files, relative to the images folder."""
        return context_name(self.plan.owner)


def context_name(name) -> str:
    return f"{name}.context"


def plan_extension(tree, target: Target, path: Path, name=None) -> Extension:
    """The layer's plan; a name that is not new, or a step the layer cannot take, is one line."""
    name = name or f"{target.name}-extended"
    if not NAME_RE.fullmatch(name) or name in tree.targets or name in tree.aliases:
        raise RecipeError(
            f"--name {name!r}: expected a new image name (letters, digits, '.', '_', '-'), not a target's",
            file="command line",
        )
    steps = dockerfile.read(path)
    plan = render_extension(target, name, steps, Path(path).name, context_name(name))
    return Extension(plan, Path(path).parent, steps.files)
