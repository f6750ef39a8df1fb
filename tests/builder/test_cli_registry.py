"""A command is one object, and one list registers them all (issue 48): the grammar, the
examples, what goes after `--` and the dispatch come from cli.registry.COMMANDS, so a new
command is one class in a module of its kind plus one line in that list."""

import argparse

import pytest
from helpers.cli_here import run_here

from builder.cli import registry
from builder.cli.command import AfterDashes, Command
from builder.cli.parser import parser as grammar

PROG = "python -m builder"  # how run_here starts the builder


def subcommands(parser):
    return next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))


@pytest.mark.parametrize("command", registry.COMMANDS, ids=lambda command: command.name)
def test_every_registered_command_has_help_an_example_and_a_parser_entry(command, monkeypatch):
    monkeypatch.setattr("sys.argv", ["builder/__main__.py"])  # the program as `python -m builder`
    assert isinstance(command, Command) and command.name and command.help.strip()
    assert command.example.format(prog=PROG).startswith(f"{PROG} {command.name}")
    sub = subcommands(grammar())
    assert command.name in sub.choices
    assert [choice.help for choice in sub._choices_actions if choice.dest == command.name] == [command.help]
    assert sub.choices[command.name].get_default("cli_command") is command
    assert command.after_dashes is None or isinstance(command.after_dashes, AfterDashes)


def test_the_names_are_unique_and_every_one_is_named_in_the_no_command_error():
    names = [command.name for command in registry.COMMANDS]
    assert len(set(names)) == len(names)
    result = run_here()
    assert result.returncode == 2
    assert result.stderr.split("expected one of: ")[1].split(" (see:")[0].split(", ") == registry.named()
    assert sorted(registry.named()) == sorted(names)


def test_the_dispatch_runs_the_chosen_objects_run(monkeypatch):
    show = next(command for command in registry.COMMANDS if command.name == "show")
    seen = []
    monkeypatch.setattr(show, "run", lambda args: seen.append(args.target) or 7)
    result = run_here("show", "cpu")
    assert (result.returncode, seen) == (7, ["cpu"])


class Hello(Command):
    """The least a command needs: a name, a line of help, an example and run()."""

    name = "hello"
    help = "say hello to a target"
    example = "{prog} hello cpu -- and more"
    after_dashes = AfterDashes("more", "more words", False)

    def add_arguments(self, parser):
        parser.add_argument("target")
        parser.add_argument("--loud", action="store_true", help="in capitals")

    def run(self, args):
        text = f"hello {args.target} {' '.join(args.more)} from {args.recipes_from}"
        print(text.upper() if args.loud else text)
        return 3


@pytest.fixture
def with_hello(monkeypatch):
    monkeypatch.setattr(registry, "COMMANDS", (*registry.COMMANDS, Hello()))


def test_a_new_command_registered_in_the_list_is_in_help_and_runs(with_hello):
    top = run_here("--help")
    assert top.returncode == 0 and "    hello      " in top.stdout and "say hello to a target" in top.stdout
    own = run_here("hello", "--help")
    assert own.returncode == 0 and "--loud" in own.stdout and "--recipes DIR" in own.stdout
    assert own.stdout.rstrip().endswith("example:\n  python -m builder hello cpu -- and more")
    done = run_here("hello", "cpu", "--loud", "--", "a", "b")
    assert (done.returncode, done.stdout, done.stderr) == (3, "HELLO CPU A B FROM IN THIS FOLDER\n", "")
    hint = run_here("hello", "cpu", "a")
    assert hint.returncode == 2 and "put more words after --, e.g. python -m builder hello cpu -- a" in hint.stderr
    assert "hello" in run_here().stderr.split("expected one of: ")[1]


def test_an_unregistered_command_is_not_in_the_grammar():
    assert "hello" not in subcommands(grammar()).choices


def test_each_commands_module_names_in_its_docstring_exactly_the_commands_it_defines():
    """The list in each module's first line is the only hand-written list besides the registry."""
    import importlib

    modules = {}
    for command in registry.COMMANDS:
        modules.setdefault(type(command).__module__, []).append(command.name)
    assert set(modules) >= {"builder.cli.recipe_commands", "builder.cli.image_commands", "builder.cli.site_commands"}
    for name, commands in modules.items():
        first = importlib.import_module(name).__doc__.split(".")[0]
        named = [word.strip() for word in first.split(":", 1)[1].split(",")]
        assert sorted(named) == sorted(commands), name
