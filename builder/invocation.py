"""How the user started the builder, so that usage lines and hints name a command that works
where it runs: `hpcml` for the installed script, `python -m builder` otherwise, and the make
targets only in a checkout (where `make` also sets up the virtual environment). A module of
its own on the bottom floor: ten modules on six floors name the program."""

import sys
from pathlib import Path


def program() -> str:
    started = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "hpcml" if started.startswith("hpcml") else "python -m builder"


def in_checkout(folder=".") -> bool:
    here = Path(folder)
    return (here / "Makefile").is_file() and (here / "builder" / "__main__.py").is_file()


def hint(make: str, command: str) -> str:
    """``make`` (a make command line) in a checkout, else ``command`` run by this program."""
    return make if in_checkout() else f"{program()} {command}"
