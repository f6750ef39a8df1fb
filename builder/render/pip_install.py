"""The lines of a block's pip install: from the target's lock where it has one, else as asked.

With a lock (builder/lockfile.py) pip resolves nothing: it installs the step's locked
distributions, each checked against its sha256, and nothing else (--no-deps
--require-hashes), so a build next month puts in what the build today did. A target without
a lock installs what the block asks for, its dependencies resolved on the day: the ROCm
targets, whose torch index does not answer where the project's locks are made.

Example, the torch block of the CPU target (asks for torch==2.13.0 from its index):

    lines(target, Request("torch", ("torch==2.13.0",), index=".../whl/cpu"), tail='"$@"')
    -> lock="$(mktemp /tmp/hpcml-pip-lock-XXXXXX)"
       cat > "$lock" <<'PIP_LOCK'
       torch==2.13.0+cpu --hash=sha256:6746...
       ...
       PIP_LOCK
       pip install --no-cache-dir --no-deps --require-hashes -r "$lock" "$@"
       rm -f "$lock"
"""

from dataclasses import dataclass

from ..errors import RecipeError
from ..lockfile import PythonLock, StaleLock
from ..recipes.target_model import Target
from ..values.shell import cmd

HEREDOC_END = "PIP_LOCK"


@dataclass(frozen=True)
class Request:
    """What one block asks pip for: its step's name (the block's), requirements, options."""

    step: str
    requirements: tuple
    options: tuple = ()
    index: str = ""  # the extra index the requirements come from (torch's)

    def asked(self) -> str:
        """One line, as the lock's step header records it."""
        index = ("--extra-index-url", self.index) if self.index else ()
        return " ".join((*self.requirements, *self.options, *index))


class Recorder:
    """Stands in for a lock while `hpcml lock` reads what each block asks for."""

    def __init__(self):
        self.requests = []


def lines(target: Target, request: Request, tail: str = "", keep=()) -> list:
    """Shell lines that install ``request`` into the active venv; ``tail``: shell words added
    after pip's arguments ('"$@"'); ``keep``: names left out of a locked install because
    the block installs them itself (deepspeed, built from its locked sdist)."""
    if locked(target, request):
        return locked_lines(target, request, tail, keep)
    asked = cmd("pip", "install", "--no-cache-dir", *request.options, *request.requirements)
    return [asked + (f" {tail}" if tail else "")]


def locked(target: Target, request: Request) -> bool:
    """Whether the target installs ``request`` from its lock (noted for `hpcml lock`)."""
    lock = target.python_lock
    if isinstance(lock, Recorder):
        lock.requests.append(request)
        return False
    return lock is not None


def locked_lines(target: Target, request: Request, tail: str = "", keep=()) -> list:
    """The step's locked distributions, written to a file and installed from it."""
    pins = [pin for pin in locked_step(target, request).pins if pin.name not in keep]
    if not pins:
        return []
    install = cmd("pip", "install", "--no-cache-dir", "--no-deps", "--require-hashes", *request.options, "-r")
    return [
        'lock="$(mktemp /tmp/hpcml-pip-lock-XXXXXX)"',
        f"cat > \"$lock\" <<'{HEREDOC_END}'",
        *(pin.requirement() for pin in pins),
        HEREDOC_END,
        f'{install} "$lock"' + (f" {tail}" if tail else ""),
        'rm -f "$lock"',
    ]


def locked_step(target: Target, request: Request):
    """The lock's step for ``request``; a one-line RecipeError when the lock is stale."""
    lock = target.python_lock
    if isinstance(lock, StaleLock):
        raise RecipeError(lock.message)
    assert isinstance(lock, PythonLock), lock
    step = lock.step(request.step)
    if step is None or step.asked != request.asked():
        made_for = f"was made for {step.asked!r}" if step else "has no such step"
        raise RecipeError(
            f"the lock is stale: step {request.step} asks for {request.asked()!r}, the lock {made_for}; "
            f"refresh it with: hpcml lock {target.name}",
            file=lock.path,
        )
    return step


def locked_pin(target: Target, request: Request, name: str):
    """The lock's pin of ``name`` in the request's step, or None without a lock."""
    lock = target.python_lock
    if lock is None or isinstance(lock, Recorder):
        return None
    return next((pin for pin in locked_step(target, request).pins if pin.name == name), None)
