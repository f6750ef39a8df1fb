"""Lmod (.lua) and Tcl module files for a published image, rendered from one description.

Values are quoted once, by the templates' filters (`quoting.py`). The module sets
the image, the site and the PATH of the entry-point wrappers; it conflicts only with other
versions of its own name (never with command names such as `python`) and puts nothing but
its own bin/ on PATH.
"""

from dataclasses import dataclass

from .. import __version__
from ..render.quoting import tcl_word
from ..render.templating import templates


@dataclass(frozen=True)
class Module:
    name: str
    version: str
    root: str  # the published version's folder: image.sif, bin/
    site: str
    description: str
    help_text: str
    whatis: tuple  # lines
    gpu_flag: str  # --nv, --rocm or ""
    slurm_mpi: str  # Slurm's --mpi type for srun, or "" for none
    container_env: tuple  # ((NAME, value), ...) the image does not set for this site
    env_prefix: str  # APPTAINERENV_ or SINGULARITYENV_, for the site's runtime


def render_lua(module: Module) -> str:
    return templates.get_template("module.lua.j2").render(m=module, builder_version=__version__)


def render_tcl(module: Module) -> str:
    return templates.get_template("module.tcl.j2").render(m=module, builder_version=__version__)


def render_default(version: str) -> str:
    """`.version`: the default version, in the Tcl form that Lmod and Environment Modules read."""
    return f"#%Module\nset ModulesVersion {tcl_word(version)}\n"


def render_entry(command: str, module: str, site: str) -> str:
    """bin/<command> of a published version: runs the command inside its image."""
    return templates.get_template("entry.sh.j2").render(
        command=command, module=module, site=site, builder_version=__version__
    )
