"""A project env's part of a bundle (`hpcml bundle TARGET --pyenv LOCK`): every file the env's
lock names (builder/pyenv_lock.py), by its sha256, under `pyenv/`, and the lock's copy under
`pyenv/locks/`, so that `hpcml env build TARGET LOCK --bundle DIR` installs it with no network
(pip's only source: that folder). A bundle keeps the envs added to it before: several projects'
envs sit side by side, each file once. The files are found and matched to the pins as the
image's are (python_part: where the build's pip would find them, each by its sha256).

Example: files(lock, indexes=[], down=[]) -> {"pyenv/hydra_core-1.3.2-py3-none-any.whl":
("https://.../hydra_core-1.3.2-py3-none-any.whl", "fa02...")}
"""

from pathlib import Path

from ..errors import RecipeError
from . import python_part

FOLDER = "pyenv"
LOCKS = f"{FOLDER}/locks"


def files(lock, indexes=(), down=()) -> dict:
    """{path in the bundle: (url, sha256)} for every file ``lock`` (a PyenvLock) names."""
    pinned = {pin.name: pin.version for pin in lock.pins}
    what = f"the files of {lock.path}"
    packages = python_part.served_files(pinned, lock.python, lock.platform, what, indexes=list(indexes), down=down)
    return python_part.taken(packages, {pin.name: pin for pin in lock.pins}, FOLDER, lock.path)


def kept(listed: dict) -> dict:
    """The env files and locks a bundle lists already: a new --pyenv adds to them."""
    return {path: sha256 for path, sha256 in listed.items() if path.startswith(f"{FOLDER}/")}


def lock_path(lock_file: Path) -> str:
    return f"{LOCKS}/{lock_file.name}"


def check(bundle: Path, listed: dict, lock) -> Path:
    """The bundle's pyenv/ folder, once it lists a file of every pin of ``lock`` (its files
    were read back against the list before); one line naming those it lacks."""
    present = set(kept(listed).values())
    missing = [f"{pin.name} {pin.version}" for pin in lock.pins if not present & set(pin.hashes)]
    if missing:
        raise RecipeError(
            f"holds no file of {', '.join(missing)} that the env lock names; add them with: "
            f"hpcml bundle {lock.target} --pyenv {lock.path or 'LOCK'} --out {bundle}",
            file=str(bundle),
        )
    return (bundle / FOLDER).resolve()
