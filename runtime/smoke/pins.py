"""`python -m smoke.pins CONSTRAINTS`: every `name==version` pin of the file is still what this
Python has installed.

The image's top layer writes the file (the frameworks block: what the layers below held, pip's
constraints while the frameworks install) and its %test runs this, so a step that moved
numpy, torch or DeepSpeed under the frameworks fails the build. One line per moved pin.
"""

import importlib.metadata
import re
import sys


def _name(name: str) -> str:
    """A project name as pip compares them (PEP 503): NumPy, numpy and num_py are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(lines) -> dict:
    pairs = (line.strip().partition("==") for line in lines)
    return {_name(name): version for name, _, version in pairs if version}


def installed() -> dict:
    return {_name(dist.metadata["Name"]): dist.version for dist in importlib.metadata.distributions()}


def moved(pins: dict, found: dict) -> list:
    """Lines naming each pin whose package is now another version, or gone."""
    return [
        f"pins: {name}: pinned {version} by the layers below, found {found.get(name, 'none')}"
        for name, version in sorted(pins.items())
        if found.get(name) != version
    ]


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("pins: error: expected one argument, the constraints file", file=sys.stderr)
        return 2
    try:
        with open(args[0]) as lines:
            pins = pinned(lines)
    except OSError as error:
        print(f"pins: error: cannot read {args[0]}: {error.strerror}", file=sys.stderr)
        return 2
    changes = moved(pins, installed())
    for line in changes:
        print(line, file=sys.stderr)
    if not changes:
        print(f"pins: {len(pins)} pins of the layers below unmoved")
    return 1 if changes else 0


if __name__ == "__main__":
    sys.exit(main())
