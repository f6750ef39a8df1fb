"""The command line's grammar, built from the commands cli.registry lists: each one's
subparser with its help, its options and its example."""

import argparse
import sys

from .. import __version__, contract
from ..errors import one_line
from ..invocation import program
from . import registry


class _Parser(argparse.ArgumentParser):
    """Usage mistakes get the same one-line error as bad recipes."""

    def error(self, message):
        print(one_line(f"error: command line: {message} (see: {self.prog} --help)"), file=sys.stderr)
        sys.exit(2)


RECIPES_HELP = (
    f"recipe tree with sites/, targets/, versions.yaml (default: ${contract.RECIPES}, else ./recipes "
    "where it holds versions.yaml, else the recipes installed with the builder)"
)


def parser() -> argparse.ArgumentParser:
    prog = program()
    # given before the command or after it; the command's own default must not undo the first
    common = _Parser(add_help=False)
    common.add_argument("--recipes", default=argparse.SUPPRESS, metavar="DIR", help=RECIPES_HELP)
    top = _Parser(
        prog=prog,
        description="Render PyTorch + DeepSpeed Apptainer images from YAML "
        "recipes, build, smoke-test and publish them, and write Slurm job scripts.",
        epilog=f"example: {prog} list; {prog} COMMAND --help for each command",
    )
    top.add_argument("--version", action="version", version=f"hpc-ml-containers {__version__}")
    top.add_argument("--recipes", default=None, metavar="DIR", help=RECIPES_HELP)
    sub = top.add_subparsers(metavar="COMMAND", parser_class=_Parser, dest="command")
    for command in registry.COMMANDS:
        cmd = sub.add_parser(
            command.name,
            parents=[common],
            help=command.help,
            epilog="example:\n  " + command.example.format(prog=prog),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(cmd)
        if command.images:  # one option, declared once: what it means is the command's
            cmd.add_argument("--images", default="images", metavar="DIR", help=f"{command.images} (default: images)")
        cmd.set_defaults(cli_command=command)
    return top
