"""The shell settings file a site's wrapper reads (wrappers/sites/<site>.sh), and the registry
of the variables only it carries.

Bash cannot read YAML, so each site file is rendered into shell assignments, committed like
the .def files and checked for staleness the same way. Paths such as `$TMPDIR` stay literal
here; the wrapper looks the variable up when it runs and never evaluates the text.

SITE_FILE is the file, a line per variable in the order written: its name, the site fact that
fills it (a string or number, or a tuple for a bash array) and, for a name defined here, its
meaning. A plain site fact the wrapper reads is declared on its field in the site model
(`wrapper_reads`, recipes/site_parts.py) and comes here from there; a value worked out from
several facts is a `Line` here. docs/variables.md's table of these names is generated from
SITE_FILE (`python -m builder.render.variable_docs`). A name defined here is in no image: the
runtime never reads a site file.

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
from ..recipes.site_parts import wrapper_fields
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


def _fact(path: tuple):
    """site -> the value at a key path of the site file, as bash reads it: true is 1, and a
    fact of a section the site leaves out (site_image, scratch.pool) is empty."""

    def value(site: Site):
        found = site
        for key in path:
            found = getattr(found, key) if found is not None else None
        return "" if found is None else int(found) if isinstance(found, bool) else found

    return value


# the plain facts declared on their model fields (recipes/site_parts.wrapper_reads)
_DECLARED = tuple(
    Line(variable, _fact(path), f"the site's `{'.'.join(path)}`: {meaning}", note)
    for path, variable, meaning, note in wrapper_fields(Site)
)

SITE_FILE = (
    Line(contract.SITE, lambda site: site.name),
    *_DECLARED,
    Line("HPCML_GPU_FLAG", lambda site: GPU_FLAGS[site.gpu.vendor], "`--nv`, `--rocm` or empty"),
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
