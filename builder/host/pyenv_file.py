"""A project env's file on this machine (the .sqsh `hpcml env build` writes): its record, read
with unsquashfs without mounting anything, and the check that it belongs to a target's image,
which jobscript and smoke make before they hand it to the wrapper.

Example: record(Path("requirements.cpu.sqsh")) -> {"target": "cpu", "python": "3.11", ...}
"""

import json
import shutil
from pathlib import Path

from .. import runner
from ..errors import RecipeError, shown

RECORD = "hpcml-pyenv.json"  # at the env's root (builder/pyenv_inside.py writes it)
MAGIC = b"hsqs"


def record(path: Path):
    """The env's record; None where this machine has no unsquashfs to read it with. One line
    when the file is not an env file."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except FileNotFoundError:
        raise RecipeError("no such file; expected the .sqsh file that hpcml env build wrote", file=str(path)) from None
    except OSError as error:
        raise RecipeError(f"cannot read it: {error.strerror}", file=str(path)) from None
    if magic != MAGIC:
        raise RecipeError(
            "not an env file (no squashfs header); expected the .sqsh that hpcml env build wrote", file=str(path)
        )
    if shutil.which("unsquashfs") is None:
        return None
    result = runner.run(["unsquashfs", "-cat", str(path), RECORD], check=False, timeout=120)
    try:
        facts = json.loads(result.stdout) if result.returncode == 0 else None
    except ValueError:
        facts = None
    if not isinstance(facts, dict) or not isinstance(facts.get("target"), str):
        raise RecipeError(
            f"a squashfs without the env's record ({RECORD}); not an env that hpcml env build wrote", file=str(path)
        )
    return facts


def check_for(path: Path, target, option: str) -> tuple:
    """Notes on the env file ``path`` (given as ``option``) for an image of ``target``: one line
    when it was built for another target; a note when it could not be read here."""
    facts = record(path)
    if facts is None:
        return (
            f"{option} {shown(str(path))}: not checked (no unsquashfs here); the wrapper checks it when the job runs",
        )
    if facts["target"] != target.name:
        raise RecipeError(
            f"{option} {shown(str(path))}: an env built for image {facts['target']}, not {target.name}; build one for "
            f"{target.name} with: hpcml env lock {target.name} REQUIREMENTS, then hpcml env build",
            file="command line",
        )
    return ()
