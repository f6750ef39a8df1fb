"""The command line's grammar: every command, its arguments and its example."""

import argparse
import sys

from .. import __version__, contract
from ..invocation import program
from . import arguments, commands


class _Parser(argparse.ArgumentParser):
    """Usage mistakes get the same one-line error as bad recipes."""

    def error(self, message):
        print(f"error: command line: {message} (see: {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


# Commands that hand everything after `--` on (argparse would let a positional list swallow
# nothing and then refuse the rest): the attribute it goes to, what belongs there (for the
# hint when it came before `--`), and whether that is options too (smoke's are).
AFTER_DASHES = {
    "smoke": ("smoke_args", "the smoke suite's arguments", True),
    "jobscript": ("program", "the program and its arguments", False),
}

# One example per command, shown at the end of its --help ({prog}: how it was started).
EXAMPLES = {
    "list": "{prog} list",
    "show": "{prog} show lumi-rocm",
    "render": "{prog} render lumi-rocm          (or: {prog} render --all)",
    "build": "{prog} build cpu                 (--force rebuilds the top layer)",
    "smoke": "{prog} smoke cpu -- --sizes 8:1M",
    "jobscript": "{prog} jobscript lumi-rocm --nodes 2 --account project_465000000 -- train.py --epochs 10",
    "publish": "{prog} publish cpu --prefix /appl/ml --name pytorch --default",
    "sign": "{prog} sign cpu --key private.pem",
    "extend": "{prog} extend cpu project/Dockerfile --name cpu-project",
    "export": "{prog} export cpu --format oci,enroot,edf --image-path '${{SCRATCH}}/images/cpu.sqsh'",
    "verify": "{prog} verify --prefix /appl/ml pytorch/2.13.0-cpu",
    "default": "{prog} default --prefix /appl/ml pytorch/2.13.0-cpu",
    "doctor": "{prog} doctor",
    "toolbox": "{prog} toolbox status",
    "check": "{prog} check",
}


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
    built = _Parser(add_help=False)
    built.add_argument(
        "--images",
        default="images",
        metavar="DIR",
        help="where built images are; their measured labels are shown (default: images)",
    )
    for name, help_text, with_built, add_arguments in _command_table():
        cmd = sub.add_parser(
            name,
            parents=[common, built] if with_built else [common],
            help=help_text,
            epilog="example:\n  " + EXAMPLES[name].format(prog=prog),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_arguments(cmd)
        cmd.set_defaults(func=getattr(commands, f"cmd_{name}"))
    return top


def _command_table():
    """(name, help, whether it reads built images' labels, the function adding its arguments)."""
    return (
        ("list", "targets and sites, one line each", True, arguments.list_arguments),
        ("show", "the fully resolved recipe of a target, as YAML", True, arguments.show_arguments),
        (
            "render",
            "write containers/<target>.def and its .devel.def and .base.def layers",
            False,
            arguments.render_arguments,
        ),
        ("build", "build images/<target>.sif with Apptainer and run its %%test", False, arguments.build_arguments),
        ("smoke", "run the image's smoke suite here: torchrun through the wrapper", False, arguments.smoke_arguments),
        (
            "jobscript",
            "the Slurm batch script that runs a program in the image on a site",
            False,
            arguments.jobscript_arguments,
        ),
        (
            "publish",
            "install a built, smoke-tested image as a site module under PREFIX",
            False,
            arguments.publish_arguments,
        ),
        ("sign", "sign a built image with a PEM private key (before its smoke tests)", False, arguments.sign_arguments),
        (
            "extend",
            "build one more layer on a built image from a Dockerfile's steps (RUN, ENV, COPY, ...)",
            False,
            arguments.extend_arguments,
        ),
        (
            "export",
            "the built image as an OCI archive, an enroot squashfs or a CSCS EDF",
            False,
            arguments.export_arguments,
        ),
        ("verify", "check a published version's files against its checksums", False, arguments.verify_arguments),
        ("default", "make a published version the default of its name", False, arguments.default_arguments),
        (
            "doctor",
            "what this host offers for builds: runtime, fakeroot, disk, mirror, pip",
            False,
            arguments.doctor_arguments,
        ),
        ("toolbox", "the Apptainer toolbox for hosts without Apptainer", False, arguments.toolbox_arguments),
        ("check", "validate every recipe; fail if rendered files are stale", False, arguments.check_arguments),
    )
