"""What a command of the command line is: one object with its name, its one-line help, its
example, its options and what it does. cli.registry lists them all; cli.parser builds the
grammar from that list and cli.main runs the chosen one's run().

Imports here and in the command modules are the light ones every command pays for; what
only one command needs (jinja2, the build, the publish stage) is imported inside its run().
"""

import argparse
import functools
from typing import NamedTuple

from ..errors import RecipeError
from ..recipes.tree import RecipeTree


class AfterDashes(NamedTuple):
    """What a command hands on from after `--` (argparse would let a positional list swallow
    nothing and then refuse the rest): the attribute it goes to, what belongs there (for the
    hint when it came before `--`), and whether that is options too (smoke's are)."""

    dest: str
    what: str
    options_too: bool


class Command:
    """One subcommand. A new one subclasses this in a module of its kind (recipe_commands,
    image_commands, site_commands), sets the attributes, and is added to cli.registry."""

    name: str = ""
    help: str = ""  # the one line in the top --help's list (argparse formats it: %% for %)
    example: str = ""  # ends its --help; {prog} is how the builder was started
    images = ""  # what --images DIR (default: images) means for it; "": it takes no --images
    after_dashes: AfterDashes | None = None  # what goes after `--`; None: nothing may

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Its positionals and options (--recipes, and --images where `images` says what it
        means, are added for it)."""

    def run(self, args: argparse.Namespace) -> int | None:
        """Does it, once the arguments are read; returns the exit status (None: 0) or raises
        a BuilderError."""
        raise NotImplementedError(self.name)


@functools.cache
def load_tree(recipes) -> RecipeTree:
    """The recipe tree, loaded once per command (the alias step and the command share it)."""
    return RecipeTree(recipes)


def positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


def add_targets_or_all(parser, all_help: str) -> None:
    """TARGET... or --all, as render and lock take them (chosen_targets reads them)."""
    parser.add_argument("targets", nargs="*", metavar="TARGET")
    parser.add_argument("--all", action="store_true", help=all_help)


def chosen_targets(args, tree) -> list:
    """The targets named (aliases resolved), or every target for --all; one line when neither
    or both."""
    if args.all == bool(args.targets):
        raise RecipeError("name one or more targets, or give --all (not both)", file="command line")
    return sorted(tree.targets) if args.all else [tree.aliases.get(name, name) for name in args.targets]
