"""The command line's grammar: every command, its arguments and its example."""

import argparse
import sys

from .. import __version__
from ..invocation import program
from . import commands


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
    "verify": "{prog} verify --prefix /appl/ml pytorch/2.13.0-cpu",
    "default": "{prog} default --prefix /appl/ml pytorch/2.13.0-cpu",
    "doctor": "{prog} doctor",
    "toolbox": "{prog} toolbox status",
    "check": "{prog} check",
}


def positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


RECIPES_HELP = "recipe tree with sites/, targets/, versions.yaml (default: recipes)"


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
    top.add_argument("--recipes", default="recipes", metavar="DIR", help=RECIPES_HELP)
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
        ("list", "targets and sites, one line each", True, _list_arguments),
        ("show", "the fully resolved recipe of a target, as YAML", True, _show_arguments),
        (
            "render",
            "write containers/<target>.def and its .devel.def and .base.def layers",
            False,
            _render_arguments,
        ),
        ("build", "build images/<target>.sif with Apptainer and run its %%test", False, _build_arguments),
        ("smoke", "run the image's smoke suite here: torchrun through the wrapper", False, _smoke_arguments),
        (
            "jobscript",
            "the Slurm batch script that runs a program in the image on a site",
            False,
            _jobscript_arguments,
        ),
        ("publish", "install a built, smoke-tested image as a site module under PREFIX", False, _publish_arguments),
        ("sign", "sign a built image with a PEM private key (before its smoke tests)", False, _sign_arguments),
        ("verify", "check a published version's files against its checksums", False, _verify_arguments),
        ("default", "make a published version the default of its name", False, _default_arguments),
        (
            "doctor",
            "what this host offers for builds: runtime, fakeroot, disk, mirror, pip",
            False,
            _doctor_arguments,
        ),
        ("toolbox", "the Apptainer toolbox for hosts without Apptainer", False, _toolbox_arguments),
        ("check", "validate every recipe; fail if rendered files are stale", False, _check_arguments),
    )


def _list_arguments(cmd):
    pass  # --images and --recipes only


def _show_arguments(cmd):
    cmd.add_argument("target")


def _render_arguments(cmd):
    cmd.add_argument("targets", nargs="*", metavar="TARGET")
    cmd.add_argument("--all", action="store_true", help="render every target")
    cmd.add_argument("--out", default="containers", metavar="DIR", help="where the .def files go (default: containers)")
    cmd.add_argument(
        "--sites-out",
        default="wrappers/sites",
        metavar="DIR",
        help="where --all writes the wrapper's site settings (default: wrappers/sites)",
    )


def _build_arguments(cmd):
    cmd.add_argument("target", nargs="?", default="cpu", help="default: cpu")
    cmd.add_argument(
        "--force",
        nargs="?",
        const="top",
        choices=("top", "all"),
        help="rebuild even if up to date: the top layer (--force, --force=top) or every layer (--force=all)",
    )
    cmd.add_argument("--images", default="images", metavar="DIR", help="where images go (default: images)")
    cmd.add_argument(
        "--no-space-check",
        dest="space_check",
        action="store_false",
        help="start even when the layers seem not to fit on the disks (the check "
        "estimates from the sizes of earlier builds)",
    )


def _smoke_arguments(cmd):
    cmd.add_argument(
        "target",
        nargs="?",
        default="cpu",
        help="default: cpu; after --, arguments for `python -m smoke all`, e.g. -- --sizes 8:1M",
    )
    cmd.set_defaults(smoke_args=[])
    cmd.add_argument("--images", default="images", metavar="DIR", help="where the image is (default: images)")
    cmd.add_argument("--out", metavar="DIR", help="report folder (default: IMAGES/<target>.smoke)")
    cmd.add_argument("--ranks", type=positive, help="ranks (default: the site's GPUs per node, or 2 without GPUs)")
    cmd.add_argument("--site", help="site whose references apply (default: the target's first)")
    cmd.add_argument("--timeout", type=positive, default=300, help="the suite's time limit in seconds (default 300)")


def _jobscript_arguments(cmd):
    cmd.add_argument("target", help="then -- and what the ranks run: train.py ARGS, or -m MODULE ARGS")
    cmd.set_defaults(program=[])
    cmd.add_argument("--site", help="default: the target's first site")
    cmd.add_argument("--nodes", type=positive, default=1, help="default: 1")
    cmd.add_argument("--gpus", type=positive, help="GPUs per node (default: all of a node)")
    cmd.add_argument("--tasks-per-node", type=positive, help="ranks per node on a site without GPUs (default: 1)")
    cmd.add_argument(
        "--launch",
        help="torchrun, srun, mpirun or deepspeed (default: the site's); "
        "deepspeed is DeepSpeed's launcher on one node and, across nodes, the srun "
        "launch (ranks from launchenv; no DeepSpeed launcher or MPI discovery)",
    )
    cmd.add_argument("--time", help="wall time limit (default: the site's slurm.time, else 01:00:00)")
    cmd.add_argument("--account", help="the project to bill (the site's form, e.g. abc@a100)")
    cmd.add_argument("--partition", help="default: the first of the site's that fits")
    cmd.add_argument(
        "--qos",
        help="default: the first of the site's that fits (a test QoS, such as Jean Zay's qos_gpu-dev, only when named)",
    )
    cmd.add_argument(
        "--bind",
        action="append",
        default=[],
        metavar="DIR",
        help="project data to bind into the container (repeatable)",
    )
    cmd.add_argument(
        "--stage", action="append", default=[], metavar="DIR", help="data to copy to node-local disk first (repeatable)"
    )
    cmd.add_argument(
        "--nvme-pool",
        metavar="SIZE",
        help="ask for SIZE (such as 100G) of the site's NVMe pool on each node, and stage there (Roihu; whole nodes)",
    )
    cmd.add_argument("--image", help="the image's path on the site (default: images/<target>.sif)")
    cmd.add_argument(
        "--wrapper",
        help="how the script calls the wrapper (default: this install's, by its "
        "absolute path; with --published, the module's singularity_wrapper)",
    )
    cmd.add_argument(
        "--published",
        metavar="DIR",
        help="a published version (PREFIX/NAME/VERSION, from publish): the script "
        "loads its module, which provides the image and the wrapper",
    )
    cmd.add_argument("--out", metavar="FILE", help="write the script here (default: stdout)")


def _publish_arguments(cmd):
    cmd.add_argument("target", nargs="?", default="cpu", help="default: cpu")
    cmd.add_argument(
        "--prefix",
        required=True,
        metavar="DIR",
        help="where modules are published: DIR/<name>/<version>, DIR/modulefiles",
    )
    cmd.add_argument("--name", default="pytorch", help="module name (default: pytorch)")
    cmd.add_argument("--version", help="module version (default: <torch version>-<target>)")
    cmd.add_argument("--site", help="site the module is for (default: the target's first)")
    cmd.add_argument("--images", default="images", metavar="DIR", help="where the image is (default: images)")
    cmd.add_argument(
        "--smoke-report", metavar="DIR", help="the image's smoke report folder (default: IMAGES/<target>.smoke)"
    )
    cmd.add_argument("--default", action="store_true", help="make this the default version")
    cmd.add_argument("--force", action="store_true", help="replace a published version")
    cmd.add_argument(
        "--skip-smoke", action="store_true", help="publish without a passing smoke report (the module's help says so)"
    )
    cmd.add_argument("--tcl", action="store_true", help="also write a Tcl module file (Environment Modules)")
    cmd.add_argument(
        "--key",
        metavar="PUBLIC.pem",
        help="publish only an image signed with this key's private half (`sign`); the module names its fingerprint",
    )


def _sign_arguments(cmd):
    cmd.add_argument("target", nargs="?", default="cpu", help="default: cpu")
    cmd.add_argument("--key", required=True, metavar="PRIVATE.pem", help="the PEM private key to sign with")
    cmd.add_argument("--images", default="images", metavar="DIR", help="where the image is (default: images)")


def _verify_arguments(cmd):
    cmd.add_argument("module", metavar="NAME/VERSION")
    cmd.add_argument("--prefix", required=True, metavar="DIR", help="as given to publish")
    cmd.add_argument(
        "--key", metavar="PUBLIC.pem", help="also check that the image is signed with this key (the one you trust)"
    )


def _default_arguments(cmd):
    cmd.add_argument("module", metavar="NAME/VERSION")
    cmd.add_argument("--prefix", required=True, metavar="DIR", help="as given to publish")


def _doctor_arguments(cmd):
    cmd.add_argument("--images", default="images", metavar="DIR")


def _toolbox_arguments(cmd):
    cmd.add_argument("action", choices=["status", "provision", "remove"])


def _check_arguments(cmd):
    cmd.add_argument(
        "--out", default="containers", metavar="DIR", help="rendered files to compare (default: containers)"
    )
    cmd.add_argument(
        "--sites-out",
        default="wrappers/sites",
        metavar="DIR",
        help="rendered site settings to compare (default: wrappers/sites)",
    )
