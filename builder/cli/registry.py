"""Every command of the command line, in the order the top --help lists them. A new command
is a Command subclass in the module of its kind, added here (cli.parser and cli.main read
only this list)."""

from .command import Command
from .env_command import Env
from .image_commands import Build, Bundle, Diff, Export, Extend, Sign, Smoke
from .rebuild_command import Rebuild
from .recipe_commands import Check, List, Lock, Render, Show
from .reframe_command import Reframe
from .site_commands import Default, Doctor, Jobscript, Publish, Verify
from .toolbox_command import Toolbox

COMMANDS: tuple[Command, ...] = (
    List(),
    Show(),
    Render(),
    Lock(),
    Build(),
    Bundle(),
    Smoke(),
    Jobscript(),
    Reframe(),
    Publish(),
    Sign(),
    Extend(),
    Env(),
    Export(),
    Diff(),
    Verify(),
    Rebuild(),
    Default(),
    Doctor(),
    Toolbox(),
    Check(),
)


def named() -> list[str]:
    """The commands' names, in --help order."""
    return [command.name for command in COMMANDS]
