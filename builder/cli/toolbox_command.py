"""The command about the builder's own Apptainer for a host that has none: toolbox.

It runs host/toolbox.py, which makes it from the host's Debian mirror, or from a source
bundle's copy (bundle/toolbox_part.py) with no network."""

from pathlib import Path

from ..errors import RecipeError
from .command import Command


class Toolbox(Command):
    name = "toolbox"
    help = "the Apptainer toolbox for hosts without Apptainer"
    example = "{prog} toolbox status"

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["status", "provision", "remove"])
        parser.add_argument(
            "--bundle",
            metavar="DIR",
            help="provision from this source bundle's copy (hpcml bundle), asking no network",
        )

    def run(self, args):
        from ..host import emulation, toolbox
        from ..host.cache import cache_dir
        from ..host.debian_resolve import DEBIAN_ARCH
        from ..host.progress import Progress

        if args.bundle and args.action != "provision":
            raise RecipeError(f"--bundle goes with provision, not {args.action}", file="command line")
        if args.action == "remove":
            toolbox.remove()
            print(f"removed {toolbox.home()}")
        elif args.action == "provision" and args.bundle:
            from ..bundle import toolbox_part

            toolbox_part.provision(Path(args.bundle), Progress(), cache_dir())
        elif args.action == "provision":
            toolbox.provision(Progress(), cache_dir())
        else:
            print(f"{toolbox.home()}: {toolbox.version() if toolbox.is_ready() else 'not provisioned'}")
            # images of the other architecture build with the host kernel's emulator, not the toolbox's
            for arch in sorted(set(DEBIAN_ARCH) - {emulation.host_arch()}):
                print(f"emulation {arch}: {emulation.state(arch)[1]}")
