"""Where the files the builder ships beside its code live: the wrapper scripts, the source of
the runtime package (launchenv and the smoke suite, which run inside images) and the recipes
it was released with.

In a checkout (or an editable install) they are the repository's own `wrappers/`, `runtime/`
and `recipes/`; `pip install .` copies them into the package as `builder/_data/`.
"""

from pathlib import Path

from .errors import ToolError

_PACKAGE = Path(__file__).resolve().parent
_ROOTS = (_PACKAGE / "_data", _PACKAGE.parent)
RECORD_PARTS = ("hpcml_json", "hpcml_report")  # what hpcml_facts is made of (hatch_build.py ships them)


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


def runtime_files() -> dict[str, Path]:
    """Every file of the runtime package's project, by its path in it (the runtime wheel's
    build copies them). An installed builder keeps the records it shares with the images
    (and the readers they are made of) at the top level, where it imports them
    (hatch_build.py), not in _data/runtime/."""
    import hpcml_contract  # imported here: only a build of the wheel asks where they are
    import hpcml_facts

    source = runtime_source()
    files = {
        path.relative_to(source).as_posix(): path
        for path in sorted(source.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
    for record in (hpcml_contract, hpcml_facts):
        files.setdefault(f"{record.__name__}.py", Path(record.__file__))
    for part in RECORD_PARTS:  # beside hpcml_facts, wherever it is
        files.setdefault(f"{part}.py", Path(hpcml_facts.__file__).with_name(f"{part}.py"))
    return files


def recipes():
    """The recipe tree released with the builder; None when this install has none."""
    return next((root / "recipes" for root in _ROOTS if (root / "recipes" / "versions.yaml").is_file()), None)


def reframe_checks() -> Path:
    """The ReFrame checks `hpcml reframe` writes beside their parameters."""
    return wrappers() / "reframe" / "hpcml_checks.py"
