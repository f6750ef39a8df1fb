"""Command line. Each command is one object (cli.command), listed once, in cli.registry (`--help`
shows that list); cli.parser builds the grammar from it, and main() runs the chosen one.

Exit status: 0 done, 2 bad input (one line saying what and where), 1 a check or an outside
tool failed.
"""

import os
import sys
from pathlib import Path

from .. import contract, resources
from ..errors import BuilderError
from ..invocation import program
from . import registry
from .command import load_tree
from .parser import parser as grammar


def main(argv=None):
    load_tree.cache_clear()  # each command reads the recipes as they are now
    parser = grammar()
    argv = list(sys.argv[1:] if argv is None else argv)
    tail = None
    if "--" in argv:
        cut = argv.index("--")
        argv, tail = argv[:cut], argv[cut + 1 :]
    args, extra = parser.parse_known_args(argv)
    command = getattr(args, "cli_command", None)  # the chosen command's object (cli.parser)
    after_dashes = command.after_dashes if command else None
    if extra:
        if after_dashes and (after_dashes.options_too or not extra[0].startswith("-")):
            parser.error(
                f"unrecognized arguments: {' '.join(extra)}; put {after_dashes.what} after --, e.g. "
                f"{program()} {command.name} {_first_positional(args)} -- {' '.join(extra)}"
            )
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if tail is not None:
        if after_dashes is None:
            parser.error(f"unrecognized arguments: -- {' '.join(tail)}")
        setattr(args, after_dashes.dest, getattr(args, after_dashes.dest, []) + tail)
    if command is None:
        parser.error(f"no command given; expected one of: {', '.join(registry.named())}")
    args.recipes, args.recipes_from = recipes_folder(args.recipes)
    try:
        _resolve_aliases(args)
        return command.run(args) or 0
    except BuilderError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_status
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def recipes_folder(given):
    """The recipe tree a command reads, and why that one: --recipes, else the environment's,
    else ./recipes where it holds a tree (a checkout, or a site's own tree), else the recipes
    installed with the builder, so that an installed hpcml works from any folder. Not checked
    here: commands that read no recipes must not fail on a wrong one."""
    if given:
        return given, "--recipes"
    if os.environ.get(contract.RECIPES):
        return os.environ[contract.RECIPES], contract.RECIPES
    if Path("recipes", "versions.yaml").is_file():
        return "recipes", "in this folder"
    installed = resources.recipes()
    return (str(installed), "installed with the builder") if installed else ("recipes", "none installed")


def _first_positional(args):
    return getattr(args, "target", None) or "TARGET"


def _resolve_aliases(args):
    """A retired machine's target name (puhti-cuda) means the target that now builds its image."""
    names = getattr(args, "targets", None) or ([args.target] if getattr(args, "target", None) else [])
    if not names or not hasattr(args, "recipes"):
        return
    aliases = load_tree(args.recipes).aliases
    for name in names:
        if name in aliases:
            print(f"note: {name} is an alias of {aliases[name]}; using {aliases[name]}", file=sys.stderr)
    if getattr(args, "targets", None):
        args.targets = list(dict.fromkeys(aliases.get(name, name) for name in args.targets))
    else:
        args.target = aliases.get(args.target, args.target)
