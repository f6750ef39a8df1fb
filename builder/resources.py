"""Where the files the builder ships beside its code live: the wrapper scripts, the source of
the runtime package (launchenv and the smoke suite, which run inside images) and the recipes
it was released with.

In a checkout (or an editable install) they are the repository's own `wrappers/`, `runtime/`
and `recipes/`; `pip install .` copies them into the package as `builder/_data/`.
"""

import importlib.util
import sys
from pathlib import Path

from .errors import ToolError

_PACKAGE = Path(__file__).resolve().parent
_ROOTS = (_PACKAGE / "_data", _PACKAGE.parent)


def _find(name: str) -> Path:
    for root in _ROOTS:
        if (root / name).is_dir():
            return root / name
    raise ToolError(
        f"the builder's {name}/ folder is missing (looked in "
        f"{' and '.join(str(root) for root in _ROOTS)}); reinstall hpc-ml-containers"
    )


def wrappers() -> Path:
    """The folder holding singularity_wrapper."""
    return _find("wrappers")


def wrapper() -> Path:
    return wrappers() / "singularity_wrapper"


def runtime_source() -> Path:
    """The runtime package's project folder (pyproject.toml, launchenv.py, smoke/)."""
    return _find("runtime")


def runtime_module(name: str):
    """One of the runtime's standard-library modules (hpcml_contract, hpcml_facts), loaded
    from its source. Registered under its own name, so that code importing it by that name
    (the smoke suite, on a host in tests) gets the same module and the same record classes."""
    source = runtime_source() / f"{name}.py"
    loaded = sys.modules.get(name)
    if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() == source.resolve():
        return loaded
    spec = importlib.util.spec_from_file_location(name, source)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def recipes():
    """The recipe tree released with the builder; None when this install has none."""
    return next((root / "recipes" for root in _ROOTS if (root / "recipes" / "versions.yaml").is_file()), None)
