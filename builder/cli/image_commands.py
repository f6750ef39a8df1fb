"""The commands that make and handle a built image: build, bundle, smoke, sign, extend, export, diff."""

from pathlib import Path

from ..errors import RecipeError
from .command import AfterDashes, Command, load_tree, positive


def _target_or_cpu(parser):
    parser.add_argument("target", nargs="?", default="cpu", help="default: cpu")


class Build(Command):
    name = "build"
    help = "build images/<target>.sif with Apptainer and run its %%test"
    example = "{prog} build cpu                 (--force rebuilds the top layer)"
    images = "where images go"

    def add_arguments(self, parser):
        _target_or_cpu(parser)
        parser.add_argument(
            "--force",
            nargs="?",
            const="top",
            choices=("top", "all"),
            help="rebuild even if up to date: the top layer (--force, --force=top) or every layer (--force=all)",
        )
        parser.add_argument(
            "--bundle",
            metavar="DIR",
            help="take every file from this source bundle (hpcml bundle), asking no network",
        )
        parser.add_argument(
            "--no-space-check",
            dest="space_check",
            action="store_false",
            help="start even when the layers seem not to fit on the disks (the check "
            "estimates from the sizes of earlier builds)",
        )

    def run(self, args):
        from ..host.progress import Progress
        from ..layerbuild.layers import build

        build(
            load_tree(args.recipes),
            args.target,
            images=Path(args.images),
            force=args.force,
            progress=Progress(),
            space_check=args.space_check,
            bundle=args.bundle,
        )


class Bundle(Command):
    name = "bundle"
    help = "fetch every file a build of the target's locks takes into one checked folder"
    example = "{prog} bundle cpu --out bundles/cpu   (then: {prog} build cpu --bundle bundles/cpu)"

    def add_arguments(self, parser):
        _target_or_cpu(parser)
        parser.add_argument("--out", metavar="DIR", help="the bundle's folder (default: bundles/<target>)")
        parser.add_argument(
            "--pyenv",
            action="append",
            default=[],
            metavar="LOCK",
            help="also every file of this project env's lock (hpcml env lock), for env build --bundle (repeatable)",
        )

    def run(self, args):
        from ..bundle import make
        from ..host.pip_indexes import indexes_down
        from ..host.progress import Progress

        tree, progress = load_tree(args.recipes), Progress()
        name = tree.aliases.get(args.target, args.target)
        down = indexes_down(make.pip_indexes(tree, name), progress)
        make.make(tree, name, Path(args.out or f"bundles/{name}"), progress, down, pyenvs=tuple(args.pyenv))


class Smoke(Command):
    name = "smoke"
    help = "run the image's smoke suite here: torchrun through the wrapper"
    example = "{prog} smoke cpu -- --sizes 8:1M"
    images = "where the image is"
    after_dashes = AfterDashes("smoke_args", "the smoke suite's arguments", True)

    def add_arguments(self, parser):
        parser.add_argument(
            "target",
            nargs="?",
            default="cpu",
            help="default: cpu; after --, arguments for `python -m smoke all`, e.g. -- --sizes 8:1M",
        )
        parser.set_defaults(smoke_args=[])
        parser.add_argument("--out", metavar="DIR", help="report folder (default: IMAGES/<target>.smoke)")
        parser.add_argument(
            "--ranks", type=positive, help="ranks (default: the site's GPUs per node, or 2 without GPUs)"
        )
        parser.add_argument("--site", help="site whose references apply (default: the target's first)")
        parser.add_argument(
            "--timeout", type=positive, default=300, help="the suite's time limit in seconds (default 300)"
        )
        parser.add_argument(
            "--pyenv", metavar="FILE", help="run it with your project env bound (the .sqsh of hpcml env build)"
        )

    def run(self, args):
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
            pyenv=args.pyenv,
        )


class Sign(Command):
    name = "sign"
    help = "sign a built image with a PEM private key (before its smoke tests)"
    example = "{prog} sign cpu --key private.pem"
    images = "where the image is"

    def add_arguments(self, parser):
        _target_or_cpu(parser)
        parser.add_argument("--key", required=True, metavar="PRIVATE.pem", help="the PEM private key to sign with")

    def run(self, args):
        from ..host import sidecar
        from ..host.images import built_image, checked_labels, image_lock
        from ..host.which_apptainer import ready_apptainer
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


class Extend(Command):
    name = "extend"
    help = "build one more layer on a built image from a Dockerfile's steps (RUN, ENV, COPY, ...)"
    example = "{prog} extend cpu project/Dockerfile --name cpu-project   (or --pyenv requirements.cpu.lock)"
    images = "where the images are"

    def add_arguments(self, parser):
        parser.add_argument("target", help="the built image to start from")
        parser.add_argument("dockerfile", type=Path, nargs="?", help="its FROM is replaced by the target's image")
        parser.add_argument("--name", help="the new image: IMAGES/NAME.sif (default: <target>-extended)")
        parser.add_argument(
            "--pyenv", type=Path, metavar="LOCK", help="bake in this project env (hpcml env lock's): one file, no bind"
        )

    def run(self, args):
        from ..host.images import built_image
        from ..host.progress import Progress
        from ..layerbuild import pyenv
        from ..layerbuild.extend import build_extension
        from ..render.extension import plan_extension

        if not (args.dockerfile or args.pyenv):
            raise RecipeError("expected a Dockerfile, --pyenv LOCK, or both", file="command line")
        tree, progress, images = load_tree(args.recipes), Progress(), Path(args.images)
        built = built_image(tree, args.target, images)  # one line when it is not built
        plan_extension(tree, built.target, args.dockerfile, args.name, args.pyenv)  # mistakes before the env build
        env = None
        if args.pyenv:
            name = args.name or f"{built.target.name}-extended"
            env = pyenv.build(built, args.pyenv, out=images / f".{name}.pyenv.sqsh", progress=progress)
        extension = plan_extension(tree, built.target, args.dockerfile, args.name, pyenv=env)
        build_extension(built, extension, images=images, progress=progress)


class Export(Command):
    name = "export"
    help = "the built image as an OCI archive, an enroot squashfs or a CSCS EDF"
    example = "{prog} export cpu --format oci,enroot,edf --image-path '${{SCRATCH}}/images/cpu.sqsh'"
    images = "where the image is and the files go"

    def add_arguments(self, parser):
        _target_or_cpu(parser)
        formats = "oci (IMAGES/<target>.oci.tar), enroot (.sqsh), edf (.toml, naming the .sqsh); repeated or a,b,c"
        parser.add_argument("--format", dest="formats", action="append", required=True, help=formats)
        parser.add_argument("--image-path", metavar="PATH", help="the squashfs's path on the site, for the EDF's image")

    def run(self, args):
        from ..export.write import ExportRequest, export
        from ..host.progress import Progress

        request = ExportRequest(
            target=args.target,
            formats=tuple(form.strip() for named in args.formats for form in named.split(",")),
            images=Path(args.images),
            image_path=args.image_path or "",
        )
        export(load_tree(args.recipes), request, Progress())


class Diff(Command):
    name = "diff"
    help = "what changed between two images, read from their SBOMs: packages, DeepSpeed ops, facts"
    example = "{prog} diff images/cpu.sif /appl/local/ml/pytorch/2.13-cpu"

    def add_arguments(self, parser):
        what = "an image (.sif, its SBOM beside it), an SBOM (.sbom.json, sbom.cdx.json) or a published version folder"
        parser.add_argument("a", metavar="A", help=f"the one before: {what}")
        parser.add_argument("b", metavar="B", help="the one after, the same kinds")
        parser.add_argument("--exit-code", action="store_true", help="exit 1 when they differ (as diff does)")

    def run(self, args):
        from ..sbom import diff

        before, after = diff.load(args.a), diff.load(args.b)
        sections = diff.compare(before, after)
        print(diff.text(before, after, sections), end="")
        return 1 if args.exit_code and sections else 0
