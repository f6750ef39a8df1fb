"""The command that takes a published version back to its image: rebuild. And publish's options
for the source bundle it keeps (the publish command is in site_commands.py)."""

from pathlib import Path

from .command import Command, load_tree


def add_bundle_options(parser):
    """publish's --bundle and --with-bundle (publish/kept_bundle.py)."""
    parser.add_argument(
        "--bundle",
        metavar="DIR",
        help="the source bundle the image was built from (hpcml bundle): checked against the target's locks, "
        "its SHA256SUMS kept as bundle.SHA256SUMS for `rebuild`; never taken from bundles/<target> unless named",
    )
    parser.add_argument(
        "--with-bundle", action="store_true", help="keep the whole bundle too, as bundle/ (hard links where it can)"
    )


class Rebuild(Command):
    name = "rebuild"
    help = "build a published version again from its kept source bundle, and compare it with the published image"
    example = "{prog} rebuild pytorch/2.13.0-cpu --prefix /appl/ml --bundle bundles/cpu"

    def add_arguments(self, parser):
        parser.add_argument("module", metavar="NAME/VERSION")
        parser.add_argument("--prefix", required=True, metavar="DIR", help="as given to publish")
        parser.add_argument(
            "--bundle",
            metavar="DIR",
            help="the bundle it was published with, where it keeps only its manifest (bundle.SHA256SUMS)",
        )
        parser.add_argument(
            "--images",
            metavar="DIR",
            help="build here and keep it (default: a fresh folder under images/, removed at the end)",
        )

    def run(self, args):
        from ..host.progress import Progress
        from ..layerbuild import layers
        from ..publish.rebuild import rebuild

        progress = Progress()

        def build(tree, target, images, bundle):  # as `build TARGET --bundle DIR --force=all` runs it
            return layers.build(tree, target, images=Path(images), force="all", progress=progress, bundle=bundle)

        rebuild(load_tree(args.recipes), args.prefix, args.module, bundle=args.bundle, images=args.images, build=build)
