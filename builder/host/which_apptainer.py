"""Which Apptainer a command uses: HPCML_APPTAINER, the site's own, the one on PATH (apptainer
or singularity), or the toolbox under the user's cache; and what that one accepts.

Example: find_apptainer(site, progress, Path("images")) -> ("/usr/bin/apptainer", "/usr/bin/apptainer")
"""

import functools
import os
import shutil

from .. import contract, runner
from ..errors import ToolError
from ..invocation import program
from . import toolbox


def installed_apptainer(site):
    """HPCML_APPTAINER, the site's `runtime.path` (when a site is given), apptainer or
    singularity: the first found."""
    wanted = [os.environ.get(contract.APPTAINER), site and site.runtime.path, "apptainer", "singularity"]
    return next(filter(None, map(shutil.which, filter(None, wanted))), None)


def ready_apptainer(site) -> str:
    """An installed Apptainer (or Singularity), or the toolbox if one was provisioned; never provisions."""
    found = installed_apptainer(site)
    if found:
        return found
    if toolbox.is_ready():
        return str(toolbox.command())
    raise ToolError(
        f"no apptainer or singularity found; run `{program()} toolbox provision` (root) or install Apptainer"
    )


@functools.cache
def takes_squashfs_args(apptainer) -> bool:
    """Apptainer 1.1+ and SingularityCE 3.9+ pass --mksquashfs-args on; older ones refuse it."""
    result = runner.run([apptainer, "build", "--help"], check=False, timeout=60)
    return "--mksquashfs-args" in result.stdout


def find_apptainer(site, progress, log_dir, mirror=None):
    """(path, label): an installed Apptainer, or else a toolbox under the user's cache (made
    from ``mirror`` when there is none yet; default: the host's Debian mirror)."""
    found = installed_apptainer(site)
    if found:
        return found, found
    return str(toolbox.ensure(progress, log_dir, mirror)), "toolbox"
