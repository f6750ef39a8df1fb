"""The contract between builder, wrapper and runtime: every `HPCML_*` variable and shared file
name, with what it means, in two registries.

- What crosses into the image, the variables the runtime reads and the files it shares, is
  defined by the runtime (runtime/hpcml_contract.py): it ships alone inside each image and
  cannot import the builder, so the builder imports it, by its own name, as the image does
  (from runtime/ in a checkout, from the wheel's top level when installed: hatch_build.py).
- The variables only a site file carries are defined with the line that writes them, in
  render/sitefile.py (SITE_FILE, VARIABLES).
- Every other variable (read by the builder, the wrapper or the tests) is defined here, in
  BUILDER_VARIABLES.
Neither of the last two is in an image, so adding a name the image never reads leaves every
image, definition and golden file as they are.

Use it as a module: `from .. import contract` then `contract.SITE_FACTS` or `contract.SITE`.
VARIABLES is both registries together, IMAGE_VARIABLES the runtime's alone.

FAILURE_MARKER is the builder's own too, shared by the lines it renders and the build that runs
them.
"""

import hpcml_contract as _CONTRACT

IMAGE_VARIABLES: dict[str, str] = _CONTRACT.VARIABLES

# A %post or %test line that starts with this is the reason a layer build failed, for users:
# the build reports that line alone instead of the log's last lines (layerbuild/layers.py).
# echo "hpcml-error: the frameworks need other versions of ..." >&2; exit 1
FAILURE_MARKER = "hpcml-error: "

BUILDER_VARIABLES: dict[str, str] = {}  # name -> meaning, in docs/variables.md's order


def _variable(name: str, meaning: str) -> str:
    BUILDER_VARIABLES[name] = meaning
    return name


# --- for users and admins ---------------------------------------------------------------------
SITE = _variable("HPCML_SITE", "which `wrappers/sites/<site>.sh` applies (default `local`)")
APPTAINER = _variable("HPCML_APPTAINER", "the Apptainer or Singularity program to use")
MIRROR = _variable("HPCML_MIRROR", "the Debian mirror for debootstrap bases, instead of the host's apt sources")
SECURITY_MIRROR = _variable(
    "HPCML_SECURITY_MIRROR",
    "the Debian security mirror (default: the host's apt sources', or the security archive beside `$HPCML_MIRROR`)",
)
STOP_GRACE = _variable(
    "HPCML_STOP_GRACE", "seconds between SIGTERM and SIGKILL when a build or smoke run is stopped (default 10)"
)
NODE_LOCAL = _variable("HPCML_NODE_LOCAL", "where `SING_STAGE` copies go, before the site's node-local disk")
STAGE_PRECHECK = _variable("HPCML_STAGE_PRECHECK", "`0`: copy without comparing `du` to `df` first (default `1`)")
STAGE_WAIT = _variable("HPCML_STAGE_WAIT", "seconds a task waits for another task's copy (default 3600)")
USER_BASE = _variable("HPCML_USER_BASE", "where `pip install` puts packages on top of a published image")
MODULE = _variable("HPCML_MODULE", "`<name>/<version>`: names the default `HPCML_USER_BASE`")
SITE_FILE = _variable("HPCML_SITE_FILE", "a site settings file to use instead of `wrappers/sites/$HPCML_SITE.sh`")
RECIPES = _variable(
    "HPCML_RECIPES",
    "the recipe tree commands read when not given `--recipes` (default: `./recipes` where it holds "
    "`versions.yaml`, else the recipes installed with the builder)",
)

# A project env (`hpcml env build`): where the wrapper binds SING_PYENV's file in the container
PYENV_MOUNT = "/opt/pyenv"

# --- inside a build, not for users ---------------------------------------------------------------
PIP_INDEXES_DOWN = _variable("HPCML_PIP_INDEXES_DOWN", "pip indexes that did not answer, left out of the build")
TOOLBOX_BINDS = _variable(
    "HPCML_TOOLBOX_BINDS", "folders to bind into the toolbox (images, work folder, cache), `:`-separated"
)
TOOLBOX_STEP = _variable("HPCML_TOOLBOX_STEP", "`inside` once it has entered its mount namespace")

# --- for tests only: fault injection -----------------------------------------------------------
KILL_AT = _variable("HPCML_KILL_AT", "SIGKILL the publish at this step")
NO_RENAME_EXCHANGE = _variable("HPCML_NO_RENAME_EXCHANGE", "`1`: publish as on a file system without `RENAME_EXCHANGE`")

VARIABLES: dict[str, str] = {**IMAGE_VARIABLES, **BUILDER_VARIABLES}


def __getattr__(name):
    """The runtime registry's names, read through this one (PEP 562)."""
    return getattr(_CONTRACT, name)


def __dir__():
    return sorted(set(globals()) | set(dir(_CONTRACT)))
