"""The interpreter and packages the builder needs, checked before anything imports them, so
that `python3 -m builder` under the wrong Python says so in one line instead of a traceback.

Every command needs the packages in NEEDED; hatchling only where the runtime wheel is built
(render, check, build), and that code asks for it through ``lacking``."""

import importlib.util
import sys

MIN_PYTHON = (3, 11)  # tomllib, datetime.UTC; pyproject.toml and ruff say the same
# import name: the package to install (pyproject.toml's dependencies)
NEEDED = {
    "yaml": "pyyaml",
    "jsonschema": "jsonschema",
    "jinja2": "jinja2",
    "cyclonedx": "cyclonedx-python-lib",
    "spython": "spython",
}


def lacking(packages, why="") -> str:
    """The one line that says this interpreter lacks ``packages`` (needed ``why``) and what
    to do."""
    where = f"{sys.executable} (Python {sys.version.split()[0]})"
    why = f" ({why})" if why else ""
    return (
        f"{where} lacks the package{'s' if len(packages) > 1 else ''} {', '.join(packages)}{why}; "
        f"in a checkout run `make setup` and use `.venv/bin/python -m builder` (or the make "
        f"targets), elsewhere `pip install` this project"
    )


def require_dependencies():
    """Exit 2 with one line when this interpreter cannot run the builder."""
    if sys.version_info < MIN_PYTHON:
        print(
            f"error: {sys.executable} (Python {sys.version.split()[0]}) is too old; the builder "
            f"needs Python {'.'.join(map(str, MIN_PYTHON))} or newer",
            file=sys.stderr,
        )
        sys.exit(2)
    missing = [package for module, package in NEEDED.items() if importlib.util.find_spec(module) is None]
    if missing:
        print(f"error: {lacking(missing)}", file=sys.stderr)
        sys.exit(2)
