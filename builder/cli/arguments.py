"""Each command's arguments, added to its subparser by cli.parser (one function a command)."""

import argparse
from pathlib import Path


def positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


def list_arguments(cmd):
    pass  # --images and --recipes only


def show_arguments(cmd):
    cmd.add_argument("target")


def render_arguments(cmd):
    cmd.add_argument("targets", nargs="*", metavar="TARGET")
    cmd.add_argument("--all", action="store_true", help="render every target")
    cmd.add_argument("--out", default="containers", metavar="DIR", help="where the .def files go (default: containers)")
    cmd.add_argument(
        "--sites-out",
        default="wrappers/sites",
        metavar="DIR",
        help="where --all writes the wrapper's site settings (default: wrappers/sites)",
    )


def build_arguments(cmd):
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


def smoke_arguments(cmd):
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


def jobscript_arguments(cmd):
    cmd.add_argument(
        "target", help="then -- and what the ranks run: train.py ARGS (named by its absolute path), or -m MODULE ARGS"
    )
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
    cmd.add_argument(
        "--time",
        help="wall time limit in any form of sbatch's --time: 30 (minutes), 2:00:00, 1-12 (days-hours), ... "
        "(default: the site's slurm.time, else 01:00:00)",
    )
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
    cmd.add_argument(
        "--image",
        help="the image's path on the site, made absolute from here unless it starts with $VARIABLE "
        "(default: the site's image folder's <target>.sif, else images/<target>.sif here)",
    )
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


def publish_arguments(cmd):
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


def sign_arguments(cmd):
    cmd.add_argument("target", nargs="?", default="cpu", help="default: cpu")
    cmd.add_argument("--key", required=True, metavar="PRIVATE.pem", help="the PEM private key to sign with")
    cmd.add_argument("--images", default="images", metavar="DIR", help="where the image is (default: images)")


def export_arguments(cmd):
    cmd.add_argument("target", nargs="?", default="cpu", help="default: cpu")
    formats = "oci (IMAGES/<target>.oci.tar), enroot (.sqsh), edf (.toml, naming the .sqsh); repeated or a,b,c"
    cmd.add_argument("--format", dest="formats", action="append", required=True, help=formats)
    cmd.add_argument("--images", default="images", metavar="DIR", help="where the image is and the files go")
    cmd.add_argument("--image-path", metavar="PATH", help="the squashfs's path on the site, for the EDF's image")


def extend_arguments(cmd):
    cmd.add_argument("target", help="the built image to start from")
    cmd.add_argument("dockerfile", type=Path, help="its FROM is replaced by the target's image")
    cmd.add_argument("--name", help="the new image: IMAGES/NAME.sif (default: <target>-extended)")
    cmd.add_argument("--images", default="images", metavar="DIR", help="where the images are (default: images)")


def verify_arguments(cmd):
    cmd.add_argument("module", metavar="NAME/VERSION")
    cmd.add_argument("--prefix", required=True, metavar="DIR", help="as given to publish")
    cmd.add_argument(
        "--key", metavar="PUBLIC.pem", help="also check that the image is signed with this key (the one you trust)"
    )


def default_arguments(cmd):
    cmd.add_argument("module", metavar="NAME/VERSION")
    cmd.add_argument("--prefix", required=True, metavar="DIR", help="as given to publish")


def doctor_arguments(cmd):
    cmd.add_argument("--images", default="images", metavar="DIR")


def toolbox_arguments(cmd):
    cmd.add_argument("action", choices=["status", "provision", "remove"])


def check_arguments(cmd):
    cmd.add_argument(
        "--out", default="containers", metavar="DIR", help="rendered files to compare (default: containers)"
    )
    cmd.add_argument(
        "--sites-out",
        default="wrappers/sites",
        metavar="DIR",
        help="rendered site settings to compare (default: wrappers/sites)",
    )
