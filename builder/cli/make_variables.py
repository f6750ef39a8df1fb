"""`make COMMAND VAR=value ...`: the variables on make's command line become the command's
options by one rule, so the Makefile names no option and a new option needs no Makefile line:

    --image-path PATH   IMAGE_PATH=PATH
    --force (a flag)    FORCE=1  (0 or empty: left out)
    --force[=all]       FORCE=1 for --force, FORCE=all for --force=all
    --bind (repeatable) BIND="/scratch /projappl"  (one --bind each)

Example: `make jobscript TARGET=lumi-rocm NODES=2 ACCOUNT=project_465000000 ARGS=train.py` runs
`hpcml jobscript lumi-rocm --nodes=2 --account=project_465000000 -- train.py`.

Make hands the variables of its command line to what its rules run in MAKEFLAGS, after ` -- `,
with spaces and backslashes escaped by a backslash and `$` doubled. A variable that is no option
of this command is left alone when it is one of another command (`make smoke SITE=lumi` builds
first, and build has no --site) or the Makefile's own (TARGET, ARGS, ...); any other name is a
mistake, reported in one line (exit 2) before anything runs.
"""

import argparse
import os
import re
import sys

from ..errors import one_line
from . import registry
from .parser import parser as grammar

# The Makefile's own variables, which no command takes as an option.
MAKEFILE_OWN = frozenset(
    {"TARGET", "ARGS", "PYTHON", "VENV", "HEAVY"}
    | {"GPU_PYTHON", "GPU_PYTHON_VERSION", "GPU_BUDGET", "GPU_OUT", "OPS", "DRY", "DEEPSPEED_TESTS"}
)
YES, NO = ("1", "yes", "true"), ("0", "no", "false", "")


def command_line_variables(makeflags: str) -> dict:
    """{name: value} of the variables MAKEFLAGS carries, as they were typed."""
    found = re.search(r"(?:^| )-- (.*)$", makeflags or "", re.S)
    words, word, escaped = [], "", False
    for char in found.group(1) if found else "":
        if escaped:
            word, escaped = word + char, False
        elif char == "\\":
            escaped = True
        elif char == " ":
            words, word = words + [word], ""
        else:
            word += char
    words.append(word)
    pairs = (word.split("=", 1) for word in words if "=" in word)
    return {name: value.replace("$$", "$") for name, value in pairs}


def variable(action: argparse.Action) -> str:
    """The make variable of an option: its long name in capitals, `-` as `_`."""
    long = max(action.option_strings, key=len)
    return long.lstrip("-").upper().replace("-", "_")


def option_actions() -> dict:
    """{command name: {variable: argparse action}} of every option each command takes, read
    from the command line's own grammar (cli.parser), its shared options too."""
    top = grammar()
    (commands,) = [action for action in top._actions if isinstance(action, argparse._SubParsersAction)]
    return {
        name: {variable(action): action for action in sub._actions if action.option_strings and action.dest != "help"}
        for name, sub in commands.choices.items()
    }


def options(command, variables: dict) -> list:
    """``command``'s options as the variables give them; SystemExit(2) for a name that is no
    option of any command and not the Makefile's, or a flag's value that is neither yes nor no."""
    every = option_actions()
    own = every[command.name]
    anyone = set().union(*every.values())
    unknown = sorted(set(variables) - anyone - MAKEFILE_OWN)
    if unknown:
        _refuse(
            f"{unknown[0]}={variables[unknown[0]]} is no option of {command.name}; expected {', '.join(sorted(own))}"
        )
    words = []
    for name, value in sorted(variables.items()):
        action = own.get(name)
        if action is not None:
            words += _words(action, name, value)
    return words


def _words(action, name, value) -> list:
    long = max(action.option_strings, key=len)
    if action.nargs == 0:
        if value.lower() not in YES + NO:
            _refuse(f"{name}={value}: {long} is a flag; expected {name}=1 or {name}=0")
        return [long] if value.lower() in YES else []
    if action.nargs == "?":
        return [] if value.lower() in NO else [long] if value.lower() in YES else [f"{long}={value}"]
    if isinstance(action, argparse._AppendAction):  # a repeatable option: one per item
        return [f"{long}={item}" for item in value.split()]
    return [f"{long}={value}"]


def _refuse(message):
    print(one_line(f"error: make's command line: {message}"), file=sys.stderr)
    sys.exit(2)


def main(argv=None) -> int:
    """`python -m builder.cli.make_variables COMMAND ARGS... [-- REST]`: `hpcml COMMAND ARGS`
    with the options make's command line gives, then `-- REST`, as the Makefile wrote them
    (after ARGS, so that a bare `--force` does not take the target as its value)."""
    from . import main as cli_main

    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    (command,) = [c for c in registry.COMMANDS if c.name == argv[0]]
    given = options(command, command_line_variables(os.environ.get("MAKEFLAGS", "")))
    return cli_main([*argv[:cut], *given, *argv[cut:]])


if __name__ == "__main__":
    sys.exit(main())
