"""The commands about a site: jobscript, publish, verify, default, doctor."""

import os
import sys
from pathlib import Path

from .. import contract
from ..errors import CheckFailed, RecipeError
from ..fileio import write_atomic
from .command import AfterDashes, Command, load_tree, positive
from .rebuild_command import add_bundle_options


class Jobscript(Command):
    name = "jobscript"
    help = "the Slurm batch script that runs a program in the image on a site"
    example = "{prog} jobscript lumi-rocm --nodes 2 --account project_465000000 -- train.py --epochs 10"
    after_dashes = AfterDashes("program", "the program and its arguments", False)

    def add_arguments(self, parser):
        parser.add_argument(
            "target",
            help="then -- and what the ranks run: train.py ARGS (named by its absolute path), or -m MODULE ARGS",
        )
        parser.set_defaults(program=[])
        slurm_options(parser)
        image_options(parser)
        parser.add_argument("--out", metavar="FILE", help="write the script here (default: stdout)")

    def run(self, args):
        from ..run import jobscript

        request = job_request(args)
        plan = jobscript.plan(load_tree(args.recipes), args.target, request)
        text = jobscript.script(plan)
        if args.out:
            write_atomic(Path(args.out), text)
        else:
            sys.stdout.write(text)
        for note in plan.notes:
            print(f"note: {note}", file=sys.stderr)
        if plan.site.retired:
            print(f"note: {plan.site.name}'s GPU nodes were shut down on {plan.site.retired}", file=sys.stderr)
        print(plan.summary(), file=sys.stderr)


def job_request(args):
    """What jobscript's options ask for (and reframe's, which take the same)."""
    from ..run.job_request import Request

    return Request(
        site=args.site or "",
        nodes=args.nodes,
        gpus=args.gpus or 0,
        tasks_per_node=args.tasks_per_node or 0,
        launch=args.launch or "",
        time=args.time or "",
        account=args.account or "",
        partition=args.partition or "",
        qos=args.qos or "",
        binds=tuple(args.bind),
        stage=tuple(args.stage),
        nvme_pool=args.nvme_pool or "",
        image=args.image or "",
        wrapper=args.wrapper or "",
        published=args.published or "",
        pyenv=args.pyenv or "",
        program=tuple(args.program),
        folder=os.getcwd(),  # the script names its paths from here, wherever the job is submitted
    )


def slurm_options(parser):
    """What the job asks Slurm for, and how its ranks start."""
    parser.add_argument("--site", help="default: the target's first site")
    parser.add_argument("--nodes", type=positive, default=1, help="default: 1")
    parser.add_argument("--gpus", type=positive, help="GPUs per node (default: all of a node)")
    parser.add_argument("--tasks-per-node", type=positive, help="ranks per node on a site without GPUs (default: 1)")
    parser.add_argument(
        "--launch",
        help="torchrun, srun, mpirun or deepspeed (default: the site's); "
        "deepspeed is DeepSpeed's launcher on one node and, across nodes, the srun "
        "launch (ranks from launchenv; no DeepSpeed launcher or MPI discovery)",
    )
    parser.add_argument(
        "--time",
        help="wall time limit in any form of sbatch's --time: 30 (minutes), 2:00:00, 1-12 (days-hours), ... "
        "(default: the site's slurm.time, else 01:00:00)",
    )
    parser.add_argument("--account", help="the project to bill (the site's form, e.g. abc@a100)")
    parser.add_argument("--partition", help="default: the first of the site's that fits")
    parser.add_argument(
        "--qos",
        help="default: the first of the site's that fits (a test QoS, such as Jean Zay's qos_gpu-dev, only when named)",
    )


def image_options(parser):
    """The data the job reaches, and the image and wrapper it runs."""
    parser.add_argument(
        "--bind",
        action="append",
        default=[],
        metavar="DIR",
        help="project data to bind into the container (repeatable)",
    )
    parser.add_argument(
        "--stage", action="append", default=[], metavar="DIR", help="data to copy to node-local disk first (repeatable)"
    )
    parser.add_argument(
        "--nvme-pool",
        metavar="SIZE",
        help="ask for SIZE (such as 100G) of the site's NVMe pool on each node, and stage there (Roihu; whole nodes)",
    )
    parser.add_argument(
        "--image",
        help="the image's path on the site, made absolute from here unless it starts with $VARIABLE "
        "(default: the site's image folder's <target>.sif, else images/<target>.sif here)",
    )
    parser.add_argument(
        "--wrapper",
        help="how the script calls the wrapper (default: this install's, by its "
        "absolute path; with --published, the module's singularity_wrapper)",
    )
    parser.add_argument(
        "--published",
        metavar="DIR",
        help="a published version (PREFIX/NAME/VERSION, from publish): the script "
        "loads its module, which provides the image and the wrapper",
    )
    parser.add_argument(
        "--pyenv",
        metavar="FILE",
        help="your project env (the .sqsh of hpcml env build): the wrapper binds and activates it on every rank",
    )


class Publish(Command):
    name = "publish"
    help = "install a built, smoke-tested image as a site module under PREFIX"
    example = "{prog} publish cpu --prefix /appl/ml --name pytorch --default"
    images = "where the image is"

    def add_arguments(self, parser):
        parser.add_argument("target", nargs="?", default="cpu", help="default: cpu")
        parser.add_argument(
            "--prefix",
            required=True,
            metavar="DIR",
            help="where modules are published: DIR/<name>/<version>, DIR/modulefiles",
        )
        parser.add_argument("--name", default="pytorch", help="module name (default: pytorch)")
        parser.add_argument("--version", help="module version (default: <torch version>-<target>)")
        parser.add_argument("--site", help="site the module is for (default: the target's first)")
        parser.add_argument(
            "--smoke-report", metavar="DIR", help="the image's smoke report folder (default: IMAGES/<target>.smoke)"
        )
        parser.add_argument("--default", action="store_true", help="make this the default version")
        parser.add_argument("--force", action="store_true", help="replace a published version")
        parser.add_argument(
            "--skip-smoke",
            action="store_true",
            help="publish without a passing smoke report (the module's help says so)",
        )
        parser.add_argument("--tcl", action="store_true", help="also write a Tcl module file (Environment Modules)")
        parser.add_argument(
            "--key",
            metavar="PUBLIC.pem",
            help="publish only an image signed with this key's private half (`sign`); the module names its fingerprint",
        )
        add_bundle_options(parser)

    def run(self, args):
        from ..publish.install import PublishRequest, publish

        request = PublishRequest(
            target=args.target,
            prefix=args.prefix,
            name=args.name,
            version=args.version or "",
            site=args.site or "",
            images=Path(args.images),
            smoke_dir=args.smoke_report or "",
            default=args.default,
            force=args.force,
            skip_smoke=args.skip_smoke,
            tcl=args.tcl,
            key=args.key or "",
            bundle=args.bundle or "",
            with_bundle=args.with_bundle,
        )
        publish(load_tree(args.recipes), request)


def _published_version(parser):
    parser.add_argument("module", metavar="NAME/VERSION")
    parser.add_argument("--prefix", required=True, metavar="DIR", help="as given to publish")


class Verify(Command):
    name = "verify"
    help = "check a published version's files against its checksums, or a built image against its lock"
    example = "{prog} verify --prefix /appl/ml pytorch/2.13.0-cpu; {prog} verify --lock images/cpu.sif"

    def add_arguments(self, parser):
        # _published_version's two, optional here: --lock IMAGE needs neither
        parser.add_argument("module", metavar="NAME/VERSION", nargs="?")
        parser.add_argument("--prefix", metavar="DIR", help="as given to publish")
        parser.add_argument(
            "--key", metavar="PUBLIC.pem", help="also check that the image is signed with this key (the one you trust)"
        )
        parser.add_argument(
            "--rebuild",
            metavar="IMAGE.sif",
            help="also check that this image, rebuilt from the same commit, holds the same files",
        )
        parser.add_argument(
            "--lock",
            metavar="IMAGE",
            help="instead: a built image (.sif, .sbom.json) or a project env (.sqsh) vs its lock",
        )
        parser.add_argument(
            "--lock-target", metavar="TARGET", help="with --lock: whose lock (default: the target the image records)"
        )
        parser.add_argument(
            "--pyenv-lock", metavar="LOCK", help="with --lock ENV.sqsh: its lock (default: the .lock beside it)"
        )

    def run(self, args):
        if args.lock:
            return self._against_lock(args)
        wanted = "expected a published version (NAME/VERSION --prefix DIR) or a built image (--lock IMAGE)"
        if args.lock_target or not (args.module and args.prefix):
            raise RecipeError(
                "--lock-target goes with --lock IMAGE" if args.lock_target else wanted, file="command line"
            )
        from ..publish.verify import verify

        verify(args.prefix, args.module, key=Path(args.key) if args.key else None)
        if args.rebuild:
            from ..host.which_apptainer import ready_apptainer
            from ..publish import rebuild_check
            from ..publish.verify import locate
            from ..published import IMAGE

            published = locate(args.prefix, args.module)[2] / IMAGE
            rebuild_check.check(ready_apptainer(None), published, Path(args.rebuild))

    @staticmethod
    def _against_lock(args):
        from ..sbom import lock_check

        named = ("NAME/VERSION", "--prefix", "--key", "--rebuild")
        given = [name for name, value in zip(named, (args.module, args.prefix, args.key, args.rebuild)) if value]
        if given:
            raise RecipeError(f"--lock checks a built image, {', '.join(given)} a published one", file="command line")
        if args.lock.endswith(".sqsh"):
            lock = Path(args.pyenv_lock or Path(args.lock).with_suffix(".lock"))
            verdict = lock_check.verify_pyenv(Path(args.lock), lock)
        elif args.pyenv_lock:
            raise RecipeError("--pyenv-lock goes with --lock ENV.sqsh (a project env)", file="command line")
        else:
            verdict = lock_check.verify(args.lock, load_tree(args.recipes), args.lock_target or "")
        for line in verdict.lines or [verdict.summary(args.lock)]:  # the differences, else the match
            print(line)
        if verdict.lines:
            raise CheckFailed(verdict.summary(args.lock))


class Default(Command):
    name = "default"
    help = "make a published version the default of its name"
    example = "{prog} default --prefix /appl/ml pytorch/2.13.0-cpu"

    def add_arguments(self, parser):
        _published_version(parser)

    def run(self, args):
        from ..publish.install import set_default

        set_default(args.prefix, args.module)


class Doctor(Command):
    name = "doctor"
    help = "what this host offers for builds: runtime, fakeroot, disk, mirror, pip"
    example = "{prog} doctor"
    images = "where images go: the free disk there is reported"

    def run(self, args):
        from ..run.doctor import report

        # an install without recipes (and none named): the host's facts are reported all the same
        named = args.recipes_from in ("--recipes", contract.RECIPES)
        tree = load_tree(args.recipes) if named or Path(args.recipes).is_dir() else None
        report(tree, Path(args.images), f"{args.recipes} ({args.recipes_from})")
