"""The command about a researcher's own packages on an image: env.

Its actions: `env lock` resolves them against the image's pins (locking/pyenv.py); `env build` installs
that lock into one squashfs file beside the image (layerbuild/pyenv.py), which the wrapper
binds when SING_PYENV names it."""

from pathlib import Path

from ..errors import RecipeError
from ..invocation import program
from .command import Command, load_tree


class Env(Command):
    name = "env"
    help = "your own Python packages on an image: lock them against its pins, build one file to bind beside it"
    example = "{prog} env lock cpu requirements.txt   (then: {prog} env build cpu requirements.cpu.lock)"
    images = "where the image is (env build; env lock of a target without a lock of its own)"

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["lock", "build"])
        parser.add_argument("target", help="the image's target")
        parser.add_argument(
            "file",
            type=Path,
            metavar="FILE",
            help="lock: a requirements file or a pyproject.toml; build: the lock that env lock wrote",
        )
        parser.add_argument(
            "--out",
            type=Path,
            metavar="PATH",
            help="lock: default FILE's stem + .<target>.lock; build: default the lock's stem + .sqsh",
        )
        parser.add_argument(
            "--bundle",
            metavar="DIR",
            help="build: take every file from this source bundle (hpcml bundle --pyenv LOCK), asking no network",
        )

    def run(self, args):
        if args.bundle and args.action != "build":
            raise RecipeError(f"--bundle goes with build, not {args.action}", file="command line")
        tree = load_tree(args.recipes)
        if args.action == "lock":
            return _lock(tree, args)
        from ..host.images import built_image
        from ..host.progress import Progress
        from ..layerbuild import pyenv

        built = built_image(tree, args.target, Path(args.images))
        pyenv.build(built, args.file, out=args.out, bundle=args.bundle, progress=Progress())


def _lock(tree, args):
    from ..fileio import write_atomic
    from ..locking import pyenv
    from ..pyenv_lock import default_path

    name = tree.target(args.target).name
    lock = pyenv.lock_pyenv(tree, name, args.file, Path(args.images))
    out = args.out or default_path(args.file, name)
    wrote = write_atomic(out, lock.text(f"{program()} env lock {name} {args.file.name}"))
    print(f"{'wrote' if wrote else 'unchanged'} {out}: {len(lock.pins)} distributions the image lacks")
