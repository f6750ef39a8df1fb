"""What the user asks `hpcml jobscript` for, and how its values are read: the Request, the
error that points at the command line, and Slurm's time forms (--time, and a partition's or
a QoS's limit, which the request is measured against)."""

import re
from dataclasses import dataclass

from ..errors import RecipeError
from ..values.shell import cmd


def command_line_error(message):
    return RecipeError(message, file="command line")


@dataclass(frozen=True)
class Request:
    """What the user asked for on the command line."""

    site: str = ""  # default: the target's first site
    nodes: int = 1
    gpus: int = 0  # per node; 0: every GPU of a node
    tasks_per_node: int = 0  # CPU sites: ranks per node (default 1)
    launch: str = ""  # default: the site's launcher
    time: str = ""  # default: the site's slurm.time, else jobscript.TIME
    account: str = ""
    partition: str = ""
    qos: str = ""  # default: the first of the site's QoS that fits
    binds: tuple[str, ...] = ()
    stage: tuple[str, ...] = ()
    nvme_pool: str = ""  # SIZE of the site's pool (scratch.pool) on each node; "" for none
    image: str = ""  # default: the published module's, the site's image folder's
    # <target>.sif, or images/<target>.sif
    published: str = ""  # a publish record (PREFIX/NAME/VERSION): the script loads it
    pyenv: str = ""  # a project env's file (hpcml env build): SING_PYENV in the script
    wrapper: str = ""  # default: singularity_wrapper of the published module, else
    # this install's, by its absolute path
    program: tuple[str, ...] = ()  # train.py --epochs 10, or -m smoke all
    folder: str = ""  # where relative paths (image, program) are from; "" keeps them as given

    def command_line(self, target: str) -> str:
        """The jobscript command that asks for this, options in a fixed order."""
        words = [target]
        for option, value in (
            ("--site", self.site),
            ("--nodes", self.nodes),
            ("--gpus", self.gpus),
            ("--tasks-per-node", self.tasks_per_node),
            ("--launch", self.launch),
            ("--time", self.time),
            ("--account", self.account),
            ("--partition", self.partition),
            ("--qos", self.qos),
            ("--nvme-pool", self.nvme_pool),
            ("--image", self.image),
            ("--published", self.published),
            ("--pyenv", self.pyenv),
        ):
            if value:
                words += [option, str(value)]
        for option, values in (("--bind", self.binds), ("--stage", self.stage)):
            for value in values:
                words += [option, value]
        return cmd(*words, "--", *self.program)


# Every form of sbatch(1)'s --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds (builder/recipes/schemas/site.yaml: the same).
SLURM_TIME = re.compile(r"(?:([0-9]+)-)?([0-9]+)(?::([0-9]+))?(?::([0-9]+))?")
TIME_FORMS = (
    "minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes or days-hours:minutes:seconds"
)


def seconds(slurm_time: str, what: str = "--time") -> int:
    """A Slurm time in seconds. No limit (0, UNLIMITED, INFINITE) is refused: it exceeds every
    partition's limit, so Slurm would leave the job pending or refuse it, and we could choose
    no partition for it."""
    match = SLURM_TIME.fullmatch(slurm_time)
    if slurm_time.upper() in ("UNLIMITED", "INFINITE") or (match and not re.search("[1-9]", slurm_time)):
        raise command_line_error(f"{what} {slurm_time}: no time limit; a job needs one, such as 30 or 2:00:00")
    if not match:
        raise command_line_error(
            f"{what} {slurm_time!r}: expected a Slurm time ({TIME_FORMS}), such as 30, 2:00:00 or 1-12"
        )
    days, first, second, third = match.groups()
    if days is None:  # minutes[:seconds], or hours:minutes:seconds
        hours, minutes, secs = (first, second, third) if third is not None else (0, first, second or 0)
    else:  # days-hours[:minutes[:seconds]]
        hours, minutes, secs = first, second or 0, third or 0
    return ((int(days or 0) * 24 + int(hours)) * 60 + int(minutes)) * 60 + int(secs)


def shown(slurm_time: str) -> str:
    """A time for messages, with its clock form where it is not one already: 90 (1:30:00)."""
    if slurm_time.count(":") == 2:
        return slurm_time
    days, rest = divmod(seconds(slurm_time), 86400)
    clock = f"{rest // 3600}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{slurm_time} ({f'{days}-' if days else ''}{clock})"
