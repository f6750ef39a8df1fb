"""`python -m smoke.imports NAME==VERSION ...`: each module imports and is that release.

The image's %test runs it for the frameworks in its top layer (Lightning, transformers,
accelerate, datasets), so that a pin pip could not honour, or a package that breaks on
import with the image's torch, fails the build instead of a user's first script.
"""

import importlib
import sys


def check(pins):
    """(ok, one line) for pins such as ["lightning==2.6.6"]."""
    found = []
    for pin in pins:
        name, _, version = pin.partition("==")
        try:
            module = importlib.import_module(name)
        except Exception as error:  # any import failure is the finding
            return False, f"imports: {name} does not import: {type(error).__name__}: {error}"
        have = getattr(module, "__version__", None)
        if version and have != version:
            return False, f"imports: {name} is {have}, expected {version}"
        found.append(f"{name} {have}")
    return True, "imports: " + ", ".join(found)


def main(argv=None):
    pins = sys.argv[1:] if argv is None else argv
    if not pins or any(not pin.partition("==")[0] for pin in pins):
        print("imports: error: expected NAME==VERSION arguments, such as lightning==2.6.6", file=sys.stderr)
        return 2
    ok, line = check(pins)
    print(line, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
