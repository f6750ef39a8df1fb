"""The shell settings file a site's wrapper reads (wrappers/sites/<site>.sh), and the registry
of the variables only it carries.

Bash cannot read YAML, so each site file is rendered into shell assignments, committed like
the .def files and checked for staleness the same way. Paths such as `$TMPDIR` stay literal
here; the wrapper looks the variable up when it runs and never evaluates the text.

SITE_FILE is the file, a line per variable in the order written: its name, the site fact that
fills it (a string or number, or a tuple for a bash array) and, for a name defined here, its
meaning. A site fact the wrapper reads is one line here, beside its schema part, its field in
the site model and the wrapper's use of it; docs/variables.md's table of these names is
generated from it (`python -m builder.render.variable_docs`). A name defined here is in no
image: the runtime never reads a site file.

The wrapper sources the file with bash (`. "$site_file"`), so each value is shell-quoted
(shell.quote) and reads back as itself; a value with a control character (a newline, a NUL,
which bash cannot hold) is refused in one line, and the comments carry the site's name and
description escaped (values.check.comment).
"""

import json
from collections.abc import Callable
from dataclasses import dataclass

from .. import contract
from ..recipes.site_model import Site
from ..values.check import VARIABLE_EXPECTED, VARIABLE_NAME, comment, field, single_line
from ..values.shell import quote

GPU_FLAGS = {"nvidia": "--nv", "amd": "--rocm", "none": ""}


@dataclass(frozen=True)
class Line:
    name: str
    value: Callable  # site -> str | int | tuple (a bash array)
    meaning: str = ""  # empty: a name of contract.py's registries, which give its meaning
    note: str = ""  # a comment written above the line, for whoever reads the site file


def _pairs(site: Site, pairs) -> tuple:
    """NAME=value items of a bash array; a NAME that is not a variable's name is refused."""
    where = _where(site)
    # the wrapper splits each item at its first =
    return tuple(f"{field(name, 'variable', VARIABLE_NAME, VARIABLE_EXPECTED, where)}={value}" for name, value in pairs)


def _where(site: Site) -> str:
    return f"site {site.name}"


def _facts(site: Site) -> str:
    return json.dumps(site.smoke_facts.to_json(), sort_keys=True, separators=(",", ":"))


SITE_FILE = (
    Line(contract.SITE, lambda site: site.name),
    Line(
        "HPCML_RUNTIME_PATH", lambda site: site.runtime.path, "the site's `runtime.path`, tried after `HPCML_APPTAINER`"
    ),
    Line(
        "HPCML_RUNTIME_MODULE",
        lambda site: site.runtime.module,
        "the site's `runtime.module`: named in the error when no runtime is found (`module load singularity`)",
        note="the module that provides the runtime here, named when none is found",
    ),
    Line("HPCML_GPU_FLAG", lambda site: GPU_FLAGS[site.gpu.vendor], "`--nv`, `--rocm` or empty"),
    Line("HPCML_REQUIRES_JOB", lambda site: int(site.runtime.requires_job), "`1`: refuse to run outside a Slurm job"),
    Line(
        "HPCML_BINDS",
        lambda site: tuple(site.binds),
        "the site's binds (bash array; the ones missing on the host are skipped)",
    ),
    Line(
        "HPCML_STAGE_ROOTS",
        lambda site: tuple(filter(None, (site.scratch.node_local, site.scratch.tmpdir))),
        "the site's node-local disk and tmpdir, for `SING_STAGE`",
        note="staged data (SING_STAGE) goes to the first of these that is set and exists",
    ),
    Line(
        "HPCML_STAGE_IN_MEMORY",
        lambda site: (site.scratch.tmpdir,) if site.scratch.tmpdir_in_memory and site.scratch.tmpdir else (),
        "the site's tmpdir when it is the node's memory: a copy staged there must fit the job's `--mem`",
    ),
    Line(
        "HPCML_JOB_DIRS",
        lambda site: _pairs(site, site.dirs_to_make),
        "the site's per-job folders (`NAME=folder` items, `${USER}` and `${SLURM_JOB_ID:-nojob}` "
        "expanded by the wrapper): made and handed to the container when a job script has not",
        note="folders of each job (scratch.make_dirs), made and handed over when no job script did",
    ),
    Line(
        "HPCML_MULTI_NODE_BINDS",
        lambda site: tuple(site.multi_node_binds_in_effect),
        "extra binds on jobs of more than one node",
        note="on jobs of more than one node only",
    ),
    Line(
        "HPCML_MULTI_NODE_ENV",
        lambda site: _pairs(site, site.multi_node.env),
        "extra environment on jobs of more than one node (`NAME=value` items)",
    ),
    Line(
        "HPCML_MULTI_NODE_LIBRARY_PATH",
        lambda site: tuple(site.multi_node_library_path_in_effect),
        "the container's `LD_LIBRARY_PATH` on jobs of more than one node",
    ),
    Line(contract.MASTER_PORT_BASE, lambda site: site.launcher.master_port_base),
    Line(
        contract.SITE_FACTS,
        _facts,
        note="what the smoke suite judges runs here against (python -m smoke reads it at run time)",
    ),
)

# name -> meaning of the variables defined here, for the contract's tests and docs/variables.md
VARIABLES: dict[str, str] = {line.name: line.meaning for line in SITE_FILE if line.meaning}


def render_site(site: Site) -> str:
    lines = [
        f"# {comment(site.name)}: {comment(site.description)}",
        f"# Generated from recipes/sites/{comment(site.name)}.yaml by python -m builder render; do not edit.",
        "# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal",
    ]
    for line in SITE_FILE:
        lines += [f"# {line.note}"] * bool(line.note) + [_assignment(line.name, line.value(site), _where(site))]
    return "\n".join(lines) + "\n"


def meaning(line: Line) -> str:
    return line.meaning or contract.VARIABLES[line.name]


def _assignment(name, value, where) -> str:
    """NAME='value' or NAME=('item' ...), which bash reads back as the value; one line each."""
    if isinstance(value, tuple):
        return f"{name}=({' '.join(quote(single_line(str(item), name, where)) for item in value)})"
    return f"{name}={quote(single_line(str(value), name, where))}"
