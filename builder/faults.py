"""Fault injection, for tests only: kill a command at an exact step, or make it take the path
of a file system that lacks an operation. Nothing sets these variables in normal use.

    HPCML_KILL_AT=<step>        `point(step)` sends SIGKILL to its own process: a real kill,
                                as by the OOM killer, a node failure or `kill -9`, at that step
                                (the steps: STEPS below, in the order publish reaches them)
    HPCML_NO_RENAME_EXCHANGE=1  `no_rename_exchange()` is true: publish swaps a version with
                                two renames, as on a file system without renameat2's
                                RENAME_EXCHANGE (NFS, Lustre, GPFS)
"""

import os
import signal

from . import contract

STEPS = (
    "publish:staged",  # the new version's folder assembled beside its place
    "publish:linked",  # its module files link to its place (dangling for a new one)
    "publish:exchanged",  # the folder swapped with the published one in one rename
    "publish:old-moved-aside",  # no exchange: the published folder renamed to .VERSION.old-*
    "publish:new-moved-in",  # the new folder renamed into place
    "publish:removing-old",  # the replaced folder about to be removed
    "publish:old-removed",
    "publish:modules-done",  # module files of this version no longer published removed
    "publish:default-written",  # .version written (--default)
)


def point(name: str):
    """Die here by SIGKILL when HPCML_KILL_AT names this step."""
    if name not in STEPS:  # a misspelt step would never fire
        raise ValueError(f"unknown fault point {name!r}")
    if os.environ.get(contract.KILL_AT) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def no_rename_exchange() -> bool:
    return os.environ.get(contract.NO_RENAME_EXCHANGE) == "1"
