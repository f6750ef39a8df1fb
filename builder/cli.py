"""Command line: list, show, render, check, build, smoke, publish, verify, default, doctor,
toolbox.

Exit status: 0 done, 2 bad input (one line saying what and where), 1 a check or an outside
tool failed.
"""

import argparse
import functools
import sys
from pathlib import Path

import yaml

from . import __version__
from .errors import BuilderError, CheckFailed, RecipeError
from .fileio import write_atomic
from .host.images import image_facts
from .invocation import program
from .recipes.tree import RecipeTree
from .render import runtime_wheel
from .render.layer_sharing import plan_layers
from .render.sitefile import render_site


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
    "verify": "{prog} verify --prefix /appl/ml pytorch/2.13.0-cpu",
    "default": "{prog} default --prefix /appl/ml pytorch/2.13.0-cpu",
    "doctor": "{prog} doctor",
    "toolbox": "{prog} toolbox status",
    "check": "{prog} check",
}


def main(argv=None):
    _tree.cache_clear()  # each command reads the recipes as they are now
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    tail = None
    if "--" in argv:
        cut = argv.index("--")
        argv, tail = argv[:cut], argv[cut + 1 :]
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = getattr(args, "command", None)
        _, what, options_too = AFTER_DASHES.get(command, (None, "", False))
        if what and (options_too or not extra[0].startswith("-")):
            parser.error(
                f"unrecognized arguments: {' '.join(extra)}; put {what} after --, e.g. "
                f"{program()} {command} {_first_positional(args)} -- {' '.join(extra)}"
            )
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if tail is not None:
        dest = AFTER_DASHES.get(getattr(args, "command", None), (None,))[0]
        if dest is None:
            parser.error(f"unrecognized arguments: -- {' '.join(tail)}")
        setattr(args, dest, getattr(args, dest, []) + tail)
    if not getattr(args, "func", None):
        parser.error(
            "no command given; expected one of: list, show, render, check, build, smoke, "
            "jobscript, publish, verify, default, doctor, toolbox"
        )
    try:
        _resolve_aliases(args)
        return args.func(args) or 0
    except BuilderError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_status
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def _first_positional(args):
    return getattr(args, "target", None) or "TARGET"


@functools.cache
def _tree(recipes) -> RecipeTree:
    """The recipe tree, loaded once per command (the alias step and the command share it)."""
    return RecipeTree(recipes)


def _resolve_aliases(args):
    """A retired machine's target name (puhti-cuda) means the target that now builds its image."""
    names = getattr(args, "targets", None) or ([args.target] if getattr(args, "target", None) else [])
    if not names or not hasattr(args, "recipes"):
        return
    aliases = _tree(args.recipes).aliases
    for name in names:
        if name in aliases:
            print(f"note: {name} is an alias of {aliases[name]}; using {aliases[name]}", file=sys.stderr)
    if getattr(args, "targets", None):
        args.targets = list(dict.fromkeys(aliases.get(name, name) for name in args.targets))
    else:
        args.target = aliases.get(args.target, args.target)


def _parser():
    prog = program()
    recipes_help = "recipe tree with sites/, targets/, versions.yaml (default: recipes)"
    # given before the command or after it; the command's own default must not undo the first
    common = _Parser(add_help=False)
    common.add_argument("--recipes", default=argparse.SUPPRESS, metavar="DIR", help=recipes_help)
    parser = _Parser(
        prog=prog,
        description="Render PyTorch + DeepSpeed Apptainer images from YAML "
        "recipes, build, smoke-test and publish them, and write Slurm job scripts.",
        epilog=f"example: {prog} list; {prog} COMMAND --help for each command",
    )
    parser.add_argument("--version", action="version", version=f"hpc-ml-containers {__version__}")
    parser.add_argument("--recipes", default="recipes", metavar="DIR", help=recipes_help)
    sub = parser.add_subparsers(metavar="COMMAND", parser_class=_Parser, dest="command")

    def command(name, **options):
        return sub.add_parser(
            name,
            epilog="example:\n  " + EXAMPLES[name].format(prog=prog),
            formatter_class=argparse.RawDescriptionHelpFormatter,
            **options,
        )

    built = _Parser(add_help=False)
    built.add_argument(
        "--images",
        default="images",
        metavar="DIR",
        help="where built images are; their measured labels are shown (default: images)",
    )
    cmd = command("list", parents=[common, built], help="targets and sites, one line each")
    cmd.set_defaults(func=cmd_list)

    cmd = command("show", parents=[common, built], help="the fully resolved recipe of a target, as YAML")
    cmd.add_argument("target")
    cmd.set_defaults(func=cmd_show)

    cmd = command(
        "render", parents=[common], help="write containers/<target>.def and its .devel.def and .base.def layers"
    )
    cmd.add_argument("targets", nargs="*", metavar="TARGET")
    cmd.add_argument("--all", action="store_true", help="render every target")
    cmd.add_argument("--out", default="containers", metavar="DIR", help="where the .def files go (default: containers)")
    cmd.add_argument(
        "--sites-out",
        default="wrappers/sites",
        metavar="DIR",
        help="where --all writes the wrapper's site settings (default: wrappers/sites)",
    )
    cmd.set_defaults(func=cmd_render)

    cmd = command("build", parents=[common], help="build images/<target>.sif with Apptainer and run its %%test")
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
    cmd.set_defaults(func=cmd_build)

    cmd = command("smoke", parents=[common], help="run the image's smoke suite here: torchrun through the wrapper")
    cmd.add_argument(
        "target",
        nargs="?",
        default="cpu",
        help="default: cpu; after --, arguments for `python -m smoke all`, e.g. -- --sizes 8:1M",
    )
    cmd.set_defaults(smoke_args=[])
    cmd.add_argument("--images", default="images", metavar="DIR", help="where the image is (default: images)")
    cmd.add_argument("--out", metavar="DIR", help="report folder (default: IMAGES/<target>.smoke)")
    cmd.add_argument("--ranks", type=_positive, help="ranks (default: the site's GPUs per node, or 2 without GPUs)")
    cmd.add_argument("--site", help="site whose references apply (default: the target's first)")
    cmd.add_argument("--timeout", type=_positive, default=300, help="the suite's time limit in seconds (default 300)")
    cmd.set_defaults(func=cmd_smoke)

    cmd = command(
        "jobscript", parents=[common], help="the Slurm batch script that runs a program in the image on a site"
    )
    cmd.add_argument("target", help="then -- and what the ranks run: train.py ARGS, or -m MODULE ARGS")
    cmd.set_defaults(program=[])
    cmd.add_argument("--site", help="default: the target's first site")
    cmd.add_argument("--nodes", type=_positive, default=1, help="default: 1")
    cmd.add_argument("--gpus", type=_positive, help="GPUs per node (default: all of a node)")
    cmd.add_argument("--tasks-per-node", type=_positive, help="ranks per node on a site without GPUs (default: 1)")
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
    cmd.set_defaults(func=cmd_jobscript)

    cmd = command("publish", parents=[common], help="install a built, smoke-tested image as a site module under PREFIX")
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
    cmd.set_defaults(func=cmd_publish)

    cmd = command("verify", parents=[common], help="check a published version's files against its checksums")
    cmd.add_argument("module", metavar="NAME/VERSION")
    cmd.add_argument("--prefix", required=True, metavar="DIR", help="as given to publish")
    cmd.set_defaults(func=cmd_verify)

    cmd = command("default", parents=[common], help="make a published version the default of its name")
    cmd.add_argument("module", metavar="NAME/VERSION")
    cmd.add_argument("--prefix", required=True, metavar="DIR", help="as given to publish")
    cmd.set_defaults(func=cmd_default)

    cmd = command(
        "doctor", parents=[common], help="what this host offers for builds: runtime, fakeroot, disk, mirror, pip"
    )
    cmd.add_argument("--images", default="images", metavar="DIR")
    cmd.set_defaults(func=cmd_doctor)

    cmd = command("toolbox", parents=[common], help="the Apptainer toolbox for hosts without Apptainer")
    cmd.add_argument("action", choices=["status", "provision", "remove"])
    cmd.set_defaults(func=cmd_toolbox)

    cmd = command("check", parents=[common], help="validate every recipe; fail if rendered files are stale")
    cmd.add_argument(
        "--out", default="containers", metavar="DIR", help="rendered files to compare (default: containers)"
    )
    cmd.add_argument(
        "--sites-out",
        default="wrappers/sites",
        metavar="DIR",
        help="rendered site settings to compare (default: wrappers/sites)",
    )
    cmd.set_defaults(func=cmd_check)
    return parser


def cmd_list(args):
    tree = _tree(args.recipes)
    print("targets:")
    for name, target in sorted(tree.targets.items()):
        print(
            f"  {name:<13} torch {target.torch_version} {target.torch_flavour:<4} "
            f"arch {','.join(target.archs) or '-':<11} sites {','.join(s.name for s in target.sites)}"
        )
        measured = image_facts(target, Path(args.images))
        if measured:
            print(f"  {'':<13} built: " + ", ".join(f"{key} {value}" for key, value in measured.items()))
    for name, error in sorted(tree.unusable.items()):
        print(f"  {name:<13} unusable: its site {Path(error.file).stem} is broken")
    for name, real in sorted(tree.aliases.items()):
        print(f"  {name:<13} alias of {real}")
    print("sites:")
    for name, site in sorted(tree.sites.items()):
        gpus = f"{site.gpu.per_node}x {site.gpu.model} ({','.join(site.gpu.arch)})" if site.gpu.arch else "no GPU"
        retired = f" (retired {site.retired})" if site.retired else ""
        print(f"  {name:<13} {gpus:<28} {site.runtime.command:<11} {site.description}{retired}")
    for name, error in sorted(tree.broken_sites.items()):
        print(f"  {name:<13} broken: {error}")


def cmd_show(args):
    tree = _tree(args.recipes)
    target = tree.target(args.target)
    # the site files as written, beside what the image is made of
    shown = dict(target.resolved, site_facts={site.name: tree.site_docs[site.name].data for site in target.sites})
    measured = image_facts(target, Path(args.images))
    if measured:
        shown["built_image"] = measured
    sys.stdout.write(yaml.safe_dump(shown, sort_keys=False, allow_unicode=True, width=100))


def cmd_render(args):
    if args.all == bool(args.targets):
        raise RecipeError("name one or more targets, or give --all (not both)", file="command line")
    tree = _tree(args.recipes)
    if args.all:
        tree.require_all_valid()
    names = sorted(tree.targets) if args.all else args.targets
    out = Path(args.out)
    texts = {
        out / plan.file_name: plan.text
        for name in names  # all of it, before writing
        for plan in plan_layers(tree, name).values()
    }
    if args.all:
        texts.update(site_files(tree, Path(args.sites_out)))
    if out.exists() and not out.is_dir():
        raise RecipeError("not a directory; expected where the .def files go", file=str(out))
    for path, text in texts.items():
        print(f"{'wrote' if write_atomic(path, text) else 'unchanged'} {path}")
    # the .def files name this wheel by sha256; a hand build passes its path (docs/building.md)
    wheel = runtime_wheel.current()
    path = out / wheel.name
    print(f"{'wrote' if wheel.write(out) else 'unchanged'} {path}")


def site_files(tree, folder):
    return {folder / f"{name}.sh": render_site(site) for name, site in sorted(tree.sites.items())}


def cmd_build(args):
    from .host.progress import Progress
    from .layerbuild.layers import build

    build(
        _tree(args.recipes),
        args.target,
        images=Path(args.images),
        force=args.force,
        progress=Progress(),
        space_check=args.space_check,
    )


def cmd_smoke(args):
    from .run import smoke

    smoke.run(
        _tree(args.recipes),
        args.target,
        images=Path(args.images),
        out=args.out,
        ranks=args.ranks,
        timeout=args.timeout,
        site=args.site,
        extra=args.smoke_args,
    )


def cmd_jobscript(args):
    from .run import jobscript

    request = jobscript.Request(
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
        image=args.image or "",
        wrapper=args.wrapper or "",
        published=args.published or "",
        program=tuple(args.program),
    )
    plan = jobscript.plan(_tree(args.recipes), args.target, request)
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


def cmd_publish(args):
    from .publish.install import publish

    publish(
        _tree(args.recipes),
        args.target,
        prefix=args.prefix,
        name=args.name,
        version=args.version,
        site=args.site,
        images=Path(args.images),
        smoke_dir=args.smoke_report,
        default=args.default,
        force=args.force,
        skip_smoke=args.skip_smoke,
        tcl=args.tcl,
    )


def cmd_verify(args):
    from .publish.verify import verify

    verify(args.prefix, args.module)


def cmd_default(args):
    from .publish.install import set_default

    set_default(args.prefix, args.module)


def _positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


def cmd_doctor(args):
    from .run.doctor import report

    # outside a checkout there is no recipe tree: the host's facts are reported all the same
    recipes = Path(args.recipes)
    report(_tree(recipes) if recipes.is_dir() or args.recipes != "recipes" else None, Path(args.images))


def cmd_toolbox(args):
    from .host import toolbox
    from .host.cache import cache_dir
    from .host.progress import Progress

    if args.action == "remove":
        toolbox.remove()
        print(f"removed {toolbox.home()}")
    elif args.action == "provision":
        toolbox.provision(Progress(), cache_dir())
    elif toolbox.is_ready():
        print(f"{toolbox.home()}: {toolbox.version()}")
    else:
        print(f"{toolbox.home()}: not provisioned")


def cmd_check(args):
    tree = _tree(args.recipes)
    tree.require_all_valid()
    out = Path(args.out)
    problems = []
    expected = set()
    for name in sorted(tree.targets):
        for plan in plan_layers(tree, name).values():
            path, text = out / plan.file_name, plan.text
            if path.name in expected:
                continue  # a shared layer, checked already
            expected.add(path.name)
            if not path.is_file():
                problems.append(f"{path} is missing")
            elif path.read_text() != text:
                problems.append(f"{path} is stale")
    if out.is_dir():
        problems += [f"{path} has no recipe" for path in sorted(out.glob("*.def")) if path.name not in expected]
    for path, text in site_files(tree, Path(args.sites_out)).items():
        if not path.is_file() or path.read_text() != text:
            problems.append(f"{path} is {'stale' if path.is_file() else 'missing'}")
    print(f"recipes: {len(tree.targets)} targets and {len(tree.sites)} sites are valid")
    if problems:
        for problem in problems:
            print(f"stale: {problem}", file=sys.stderr)
        raise CheckFailed(
            f"{out}/ does not match the recipes; run: {program()} render --all"
            + (f" --out {out}" if str(out) != "containers" else "")
        )
    print(f"{out}/: all {len(expected)} rendered files of {len(tree.targets)} targets are up to date")
