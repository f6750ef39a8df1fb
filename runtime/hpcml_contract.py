"""The contract between the three programs of hpc-ml-containers: the builder (builder/), the
bash wrapper (wrappers/singularity_wrapper and the site files it sources) and the runtime in
each image (launchenv, the smoke suite). Every `HPCML_*` variable that passes between them,
and every file name one of them writes and another reads, is defined here once, with what it
means.

It lives in the runtime package because the runtime ships alone, as a wheel inside each
image, and cannot import the builder; the builder loads this same file (builder/contract.py).
Bash cannot import it: tests/builder/test_contract.py checks that the wrapper, the builder's shell
scripts and templates and docs/design.md name exactly these variables, each meaning given
there word for word. Standard library only.
"""

VARIABLES: dict[str, str] = {}  # name -> meaning, in docs/design.md's order
FILES: dict[str, str] = {}  # file name -> meaning


def _variable(name: str, meaning: str) -> str:
    VARIABLES[name] = meaning
    return name


def _file(name: str, meaning: str) -> str:
    FILES[name] = meaning
    return name


# --- for users and admins ---------------------------------------------------------------------
SITE = _variable("HPCML_SITE", "which `wrappers/sites/<site>.sh` applies (default `local`)")
APPTAINER = _variable("HPCML_APPTAINER", "the Apptainer or Singularity program to use")
MIRROR = _variable("HPCML_MIRROR", "the Debian mirror for debootstrap bases, instead of the host's apt sources")
STOP_GRACE = _variable(
    "HPCML_STOP_GRACE", "seconds between SIGTERM and SIGKILL when a build or smoke run is stopped (default 10)"
)
NODE_LOCAL = _variable("HPCML_NODE_LOCAL", "where `SING_STAGE` copies go, before the site's node-local disk")
STAGE_PRECHECK = _variable("HPCML_STAGE_PRECHECK", "`0`: copy without comparing `du` to `df` first (default `1`)")
STAGE_WAIT = _variable("HPCML_STAGE_WAIT", "seconds a task waits for another task's copy (default 3600)")
USER_BASE = _variable("HPCML_USER_BASE", "where `pip install` puts packages on top of a published image")
MODULE = _variable("HPCML_MODULE", "`<name>/<version>`: names the default `HPCML_USER_BASE`")
SITE_FILE = _variable("HPCML_SITE_FILE", "a site settings file to use instead of `wrappers/sites/$HPCML_SITE.sh`")
ALLOW_EMULATION = _variable(
    "HPCML_ALLOW_EMULATION",
    "`1`: run an image of another CPU architecture than the node's (emulated by QEMU, many times "
    "slower) instead of refusing",
)

# --- written into each site file by builder/render/sitefile.py, read by the wrapper -----------
RUNTIME_PATH = _variable("HPCML_RUNTIME_PATH", "the site's `runtime.path`, tried after `HPCML_APPTAINER`")
RUNTIME_MODULE = _variable(
    "HPCML_RUNTIME_MODULE",
    "the site's `runtime.module`: named in the error when no runtime is found (`module load singularity`)",
)
GPU_FLAG = _variable("HPCML_GPU_FLAG", "`--nv`, `--rocm` or empty")
REQUIRES_JOB = _variable("HPCML_REQUIRES_JOB", "`1`: refuse to run outside a Slurm job")
BINDS = _variable("HPCML_BINDS", "the site's binds (bash array; the ones missing on the host are skipped)")
STAGE_ROOTS = _variable("HPCML_STAGE_ROOTS", "the site's node-local disk and tmpdir, for `SING_STAGE`")
JOB_DIRS = _variable(
    "HPCML_JOB_DIRS",
    "the site's per-job folders (`NAME=folder` items, `${USER}` and `${SLURM_JOB_ID:-nojob}` "
    "expanded by the wrapper): made and handed to the container when a job script has not",
)
MULTI_NODE_BINDS = _variable("HPCML_MULTI_NODE_BINDS", "extra binds on jobs of more than one node")
MULTI_NODE_ENV = _variable(
    "HPCML_MULTI_NODE_ENV", "extra environment on jobs of more than one node (`NAME=value` items)"
)
MULTI_NODE_LIBRARY_PATH = _variable(
    "HPCML_MULTI_NODE_LIBRARY_PATH", "the container's `LD_LIBRARY_PATH` on jobs of more than one node"
)
MASTER_PORT_BASE = _variable(
    "HPCML_MASTER_PORT_BASE",
    "the base of `MASTER_PORT`; the wrapper exports it (default 10000) and `launchenv` reads it",
)
SITE_FACTS = _variable(
    "HPCML_SITE_FACTS",
    "the site's all-reduce references, network and notes as "
    "JSON; the wrapper passes it into the container, where "
    "`python -m smoke` reads it",
)

# --- inside a build or a run, not for users ----------------------------------------------------
PIP_INDEXES_DOWN = _variable("HPCML_PIP_INDEXES_DOWN", "pip indexes that did not answer, left out of the build")
TOOLBOX_BINDS = _variable(
    "HPCML_TOOLBOX_BINDS", "folders to bind into the toolbox (images, work folder, cache), `:`-separated"
)
TOOLBOX_STEP = _variable("HPCML_TOOLBOX_STEP", "`inside` once it has entered its mount namespace")
LAUNCHED_BY = _variable("HPCML_LAUNCHED_BY", "which launcher the ranks came from, kept when CMD reads them again")

# --- for tests only: fault injection and stand-ins ---------------------------------------------
KILL_AT = _variable("HPCML_KILL_AT", "SIGKILL the publish at this step")
NO_RENAME_EXCHANGE = _variable("HPCML_NO_RENAME_EXCHANGE", "`1`: publish as on a file system without `RENAME_EXCHANGE`")
NETCHECK_SYSFS = _variable("HPCML_NETCHECK_SYSFS", "a stand-in for `/sys`, to fake a CXI device")

# --- files the runtime writes and the builder reads, or the other way round --------------------
SMOKE_FOLDER = _file(
    "smoke-report", "where `python -m smoke` writes unless given `--out` (`hpcml smoke` gives `images/<target>.smoke/`)"
)
SMOKE_REPORT = _file(
    "smoke.json",
    "the smoke suite's report: machine, versions, all-reduce rows, "
    "each check's verdict; `hpcml smoke`, `publish` and `verify` "
    "read its `verdict`",
)
SMOKE_PLOT = _file("smoke-busbw.png", "busbw against message size, with the site's floor, beside the report")
IMAGE_FACTS = _file(
    "share/hpc-ml-runtime/image.json",
    "what the image promises (GPU archs, "
    "DeepSpeed ops, communication stack), under "
    "its venv: the build writes it, the smoke "
    "suite reads it",
)
