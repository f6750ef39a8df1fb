"""The commands that read the recipes: list, show, render, check, lock."""

import sys
from pathlib import Path

import yaml

from ..errors import CheckFailed, RecipeError, ToolError
from ..fileio import write_atomic
from ..host.images import built_facts
from ..invocation import program
from ..lockfile import PythonLock
from ..recipes import driver_fit
from ..recipes.tree import RecipeTree
from ..render import runtime_wheel
from ..render.sitefile import render_site
from .command import Command, add_targets_or_all, chosen_targets, load_tree


class List(Command):
    name = "list"
    help = "targets and sites, one line each"
    example = "{prog} list"
    images = "where built images are; their measured labels are shown"

    def run(self, args):
        tree = load_tree(args.recipes)
        print("targets:")
        for name, target in sorted(tree.targets.items()):
            print(
                f"  {name:<13} torch {target.torch.version:<6} {target.torch.flavour:<4} "
                f"{target.arch:<7} gpu {','.join(target.archs) or '-':<11} sites {_site_names(target)}"
            )
            measured = built_facts(target, Path(args.images))
            if measured:
                print(f"  {'':<13} built: " + ", ".join(f"{key} {value}" for key, value in measured.items()))
            if why := unlocked_why(target):
                print(f"  {'':<13} unlocked: {why}")
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


def unlocked_why(target) -> str:
    """Why the target's pip installs are not locked, for list and show; "" when they are."""
    if target.site_image:
        return "it starts from its site's image, whose Python packages the site installed"
    if isinstance(target.python_lock, PythonLock):
        return ""
    if target.python_lock is not None:
        return target.python_lock.message  # a StaleLock says what to run
    if target.torch.index:
        return (
            f"no recipes/locks/{target.name}/python.txt: its torch index ({target.torch.index}) did not "
            f"answer where the locks were made; make it where it does with `{program()} lock {target.name}` "
            "and commit it (docs/lumi.md#locks-for-the-rocm-images)"
        )
    return f"no recipes/locks/{target.name}/python.txt; make it with `{program()} lock {target.name}`"


def _site_names(target) -> str:
    """Its sites, each retired machine marked: which of them still run."""
    return ",".join(site.name + ("(retired)" if site.retired else "") for site in target.sites)


class Show(Command):
    name = "show"
    help = "the fully resolved recipe of a target, as YAML"
    example = "{prog} show lumi-rocm"
    images = "where built images are; their measured labels are shown"

    def add_arguments(self, parser):
        parser.add_argument("target")

    def run(self, args):
        tree = load_tree(args.recipes)
        target = tree.target(args.target)
        # the site files as written, beside what the image is made of
        shown = dict(target.resolved, site_facts={site.name: tree.site_docs[site.name].data for site in target.sites})
        measured = built_facts(target, Path(args.images))
        if measured:
            shown["built_image"] = measured
        if why := unlocked_why(target):
            shown["unlocked"] = why
        sys.stdout.write(yaml.safe_dump(shown, sort_keys=False, allow_unicode=True, width=100))


class Render(Command):
    name = "render"
    help = "write containers/<target>.def and its .devel.def and .base.def layers"
    example = "{prog} render lumi-rocm          (or: {prog} render --all)"

    def add_arguments(self, parser):
        add_targets_or_all(parser, "render every target")
        parser.add_argument(
            "--out", default="containers", metavar="DIR", help="where the .def files go (default: containers)"
        )
        parser.add_argument(
            "--sites-out",
            default="wrappers/sites",
            metavar="DIR",
            help="where --all writes the wrapper's site settings (default: wrappers/sites)",
        )

    def run(self, args):
        from ..render.layer_sharing import plan_layers  # jinja2 and the blocks: render and check only

        tree = load_tree(args.recipes)
        names = chosen_targets(args, tree)
        if args.all:
            tree.require_all_valid()
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


def _stale_debian_locks(tree) -> list:
    """The Debian locks whose stage now asks for other packages (the Python locks' staleness
    shows as a render error already)."""
    from ..locking import debian

    return [
        f"{deb.path} is stale; run: {program()} lock {name}"
        for name, target in sorted(tree.targets.items())
        for deb in target.debian_locks
        if not debian.fits(deb, tree, target, deb.stage)
    ]


def site_files(tree, folder):
    return {folder / f"{name}.sh": render_site(site) for name, site in sorted(tree.sites.items())}


class Check(Command):
    name = "check"
    help = "validate every recipe; fail if rendered files are stale"
    example = "{prog} check"

    def add_arguments(self, parser):
        parser.add_argument(
            "--out", default="containers", metavar="DIR", help="rendered files to compare (default: containers)"
        )
        parser.add_argument(
            "--sites-out",
            default="wrappers/sites",
            metavar="DIR",
            help="rendered site settings to compare (default: wrappers/sites)",
        )

    def run(self, args):
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
        problems += _stale_debian_locks(tree)
        print(f"recipes: {len(tree.targets)} targets and {len(tree.sites)} sites are valid")
        for target in (tree.targets[name] for name in sorted(tree.targets)):
            for site in target.sites:  # a named choice outside a site's driver: said, not refused
                if refused := driver_fit.refusal(tree, target, site):
                    print(f"warning: {refused}", file=sys.stderr)
        if problems:
            for problem in problems:
                print(f"stale: {problem}", file=sys.stderr)
            raise CheckFailed(
                f"{out}/ does not match the recipes; run: {program()} render --all"
                + (f" --out {out}" if str(out) != "containers" else "")
            )
        print(f"{out}/: all {len(expected)} rendered files of {len(tree.targets)} targets are up to date")


class Lock(Command):
    name = "lock"
    help = "resolve what each image's pip installs into recipes/locks/<target>/python.txt"
    example = "{prog} lock cpu               (or: {prog} lock --all; --update re-resolves every step)"

    def add_arguments(self, parser):
        add_targets_or_all(parser, "every target whose sources answer here")
        parser.add_argument(
            "--update", action="store_true", help="resolve every step afresh, not only those the recipe changed"
        )

    def run(self, args):
        from ..lockfile import PythonLock, load_debian
        from ..locking import changes, debian, python
        from ..render.layer_sharing import layer_owner_unlocked

        tree = load_tree(args.recipes)
        names = chosen_targets(args, tree)
        owners = {name: layer_owner_unlocked(tree, name) for name in names}
        # an owner first: a target on another's lower layers takes its base steps as they are
        names.sort(key=lambda n: owners[n] != n)
        made = {}
        for name in names:
            owner_lock = None
            if owners[name] != name:
                current = tree.target(owners[name]).python_lock
                owner_lock = made.get(owners[name]) or (current if isinstance(current, PythonLock) else None)
            try:
                lock = python.lock_target(tree, name, update=args.update, owner_lock=owner_lock)
            except (RecipeError, ToolError) as error:
                if not args.all:
                    raise
                print(f"{name}: not locked here: {getattr(error, 'message', error)}")
                continue
            made[name] = lock
            before = tree.target(name).python_lock
            wrote = write_atomic(Path(lock.path), lock.text(f"{program()} lock {name}"))
            count = sum(len(step.pins) for step in lock.steps)
            print(f"{'wrote' if wrote else 'unchanged'} {lock.path} ({count} distributions)")
            for line in changes.report(lock.path, before, lock) if wrote else ():
                print(line)
            # a new Python lock is read again: the stages are planned from definitions that install it
            for deb in debian.lock_stages(RecipeTree(tree.root) if wrote else tree, name, update=args.update):
                before = load_debian(tree.root, name, deb.stage)
                wrote_deb = write_atomic(Path(deb.path), deb.text(name, f"{program()} lock {name}"))
                print(f"{'wrote' if wrote_deb else 'unchanged'} {deb.path} ({len(deb.packages)} Debian packages)")
                for line in changes.report(deb.path, before, deb) if wrote_deb else ():
                    print(line)
        if made:
            print(f"next: {program()} render {' '.join(sorted(made)) if not args.all else '--all'}")
        return 0
