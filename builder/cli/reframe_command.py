"""The command that writes an image's checks for a site's ReFrame runs: reframe."""

import sys
from pathlib import Path

from .command import Command, load_tree
from .site_commands import image_options, job_request, slurm_options


class Reframe(Command):
    name = "reframe"
    help = "the image's checks for the site's ReFrame runs: a folder of checks, job scripts and settings"
    example = "{prog} reframe lumi-rocm --nodes 2 --account project_465000000 --out /appl/checks/lumi-rocm"

    def add_arguments(self, parser):
        parser.add_argument("target")
        parser.set_defaults(program=[])
        slurm_options(parser)
        image_options(parser)
        parser.add_argument(
            "--scheduler",
            choices=("slurm", "squeue"),
            default="slurm",
            help="how ReFrame follows the jobs: slurm (sacct; the default), or squeue where the cluster keeps "
            "no accounting",
        )
        parser.add_argument("--out", metavar="DIR", required=True, help="the folder to write (made if missing)")

    def run(self, args):
        from ..run import reframe_suite

        request = job_request(args)
        files = reframe_suite.suite(load_tree(args.recipes), args.target, request, args.scheduler)
        out = Path(args.out)
        reframe_suite.write(out, files)
        print(
            f"wrote {len(files) + 1} files to {out}; run: reframe -C {out}/settings.py -c {out}/hpcml_checks.py -r",
            file=sys.stderr,
        )
