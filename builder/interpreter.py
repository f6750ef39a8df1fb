"""The interpreter and packages the builder needs, checked before anything imports them, so
that `python3 -m builder` under the wrong Python says so in one line instead of a traceback."""

import importlib.util
import sys

MIN_PYTHON = (3, 10)
# import name: the package to install (pyproject.toml's dependencies)
NEEDED = {"yaml": "pyyaml", "jsonschema": "jsonschema", "jinja2": "jinja2", "hatchling": "hatchling"}


def missing_dependencies():
    return [package for module, package in NEEDED.items() if importlib.util.find_spec(module) is None]


def require_dependencies():
    """Exit 2 with one line when this interpreter cannot run the builder."""
    where = f"{sys.executable} (Python {sys.version.split()[0]})"
    if sys.version_info < MIN_PYTHON:
        problem = f"needs Python {'.'.join(map(str, MIN_PYTHON))} or newer"
    else:
        missing = missing_dependencies()
        if not missing:
            return
        problem = f"lacks the package{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
    print(f"error: {where} {problem}; in a checkout run `make setup` and use `.venv/bin/python "
          f"-m builder` (or the make targets), elsewhere `pip install` this project",
          file=sys.stderr)
    sys.exit(2)
