"""What each command does, once its arguments are read (cli.parser)."""

import functools
import os
import sys
from pathlib import Path

import yaml

from .. import contract
from ..errors import CheckFailed, RecipeError
from ..fileio import write_atomic
from ..host.images import image_facts
from ..invocation import program
from ..recipes.tree import RecipeTree
from ..render import runtime_wheel
from ..render.sitefile import render_site


@functools.cache
def load_tree(recipes) -> RecipeTree:
    """The recipe tree, loaded once per command (the alias step and the command share it)."""
    return RecipeTree(recipes)


def cmd_list(args):
    tree = load_tree(args.recipes)
    print("targets:")
    for name, target in sorted(tree.targets.items()):
        print(
            f"  {name:<13} torch {target.torch.version:<6} {target.torch.flavour:<4} "
            f"{target.arch:<7} gpu {','.join(target.archs) or '-':<11} sites {_site_names(target)}"
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
        print(f"  {name:<13} {site.cpu.arch:<7} {gpus:<28} {site.runtime.command:<11} {site.description}{retired}")
    for name, error in sorted(tree.broken_sites.items()):
        print(f"  {name:<13} broken: {error}")


def _site_names(target) -> str:
    """Its sites, each retired machine marked: which of them still run."""
    return ",".join(site.name + ("(retired)" if site.retired else "") for site in target.sites)


def cmd_show(args):
    tree = load_tree(args.recipes)
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
    from ..render.layer_sharing import plan_layers  # jinja2 and the blocks: render and check only

    tree = load_tree(args.recipes)
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
    from ..host.progress import Progress
    from ..layerbuild.layers import build

    build(
        load_tree(args.recipes),
        args.target,
        images=Path(args.images),
        force=args.force,
        progress=Progress(),
        space_check=args.space_check,
    )


def cmd_smoke(args):
    from ..run import smoke

    smoke.run(
        load_tree(args.recipes),
        args.target,
        images=Path(args.images),
        out=args.out,
        ranks=args.ranks,
        timeout=args.timeout,
        site=args.site,
        extra=args.smoke_args,
    )


def cmd_jobscript(args):
    from ..run import jobscript

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
        nvme_pool=args.nvme_pool or "",
        image=args.image or "",
        wrapper=args.wrapper or "",
        published=args.published or "",
        program=tuple(args.program),
        folder=os.getcwd(),  # the script names its paths from here, wherever the job is submitted
    )
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


def cmd_publish(args):
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
    )
    publish(load_tree(args.recipes), request)


def cmd_sign(args):
    from ..host import sidecar
    from ..host.images import built_image, checked_labels, image_lock, ready_apptainer
    from ..publish import signing

    key = Path(args.key)
    signing.check_private(key)  # a wrong key file: one line, before anything else
    built = built_image(load_tree(args.recipes), args.target, Path(args.images))
    apptainer = ready_apptainer(built.site)
    checked_labels(apptainer, built)
    with image_lock(Path(args.images), built.target.name):  # no build, smoke run or publish meanwhile
        layer_key = sidecar.current_key(built.path)
        signing.sign_in_place(apptainer, built.path, key, built.path.parent)
        if layer_key:  # the same layers, signed: `build` keeps it
            sidecar.write(built.path, layer_key)
    print(f"signed {built.path} with {key}; run its smoke tests now: publish needs a report of the signed image")


def cmd_extend(args):
    from ..host.images import built_image
    from ..host.progress import Progress
    from ..layerbuild.extend import build_extension
    from ..render.extension import plan_extension

    tree = load_tree(args.recipes)
    built = built_image(tree, args.target, Path(args.images))  # one line when it is not built
    extension = plan_extension(tree, built.target, args.dockerfile, args.name)
    build_extension(built, extension, images=Path(args.images), progress=Progress())


def cmd_export(args):
    from ..export.write import ExportRequest, export
    from ..host.progress import Progress

    request = ExportRequest(
        target=args.target,
        formats=tuple(form.strip() for named in args.formats for form in named.split(",")),
        images=Path(args.images),
        image_path=args.image_path or "",
    )
    export(load_tree(args.recipes), request, Progress())


def cmd_verify(args):
    from ..publish.verify import verify

    verify(args.prefix, args.module, key=Path(args.key) if args.key else None)


def cmd_default(args):
    from ..publish.install import set_default

    set_default(args.prefix, args.module)


def cmd_doctor(args):
    from ..run.doctor import report

    # an install without recipes (and none named): the host's facts are reported all the same
    named = args.recipes_from in ("--recipes", contract.RECIPES)
    tree = load_tree(args.recipes) if named or Path(args.recipes).is_dir() else None
    report(tree, Path(args.images), f"{args.recipes} ({args.recipes_from})")


def cmd_toolbox(args):
    from ..host import emulation, toolbox
    from ..host.cache import cache_dir
    from ..host.progress import Progress
    from ..recipes.target_model import DEBIAN_ARCH

    if args.action == "remove":
        toolbox.remove()
        print(f"removed {toolbox.home()}")
    elif args.action == "provision":
        toolbox.provision(Progress(), cache_dir())
    else:
        print(f"{toolbox.home()}: {toolbox.version() if toolbox.is_ready() else 'not provisioned'}")
        # images of the other architecture build with the host kernel's emulator, not the toolbox's
        for arch in sorted(set(DEBIAN_ARCH) - {emulation.host_arch()}):
            print(f"emulation {arch}: {emulation.state(arch)[1]}")


def cmd_check(args):
    from ..render.layer_sharing import plan_layers

    tree = load_tree(args.recipes)
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
