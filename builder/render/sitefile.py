"""The shell settings file a site's wrapper reads (wrappers/sites/<site>.sh).

Bash cannot read YAML, so each site file is rendered into shell assignments, committed like
the .def files and checked for staleness the same way. Paths such as `$TMPDIR` stay literal
here; the wrapper looks the variable up when it runs and never evaluates the text.
"""

import json

from .. import contract
from ..shell import quote

GPU_FLAGS = {"nvidia": "--nv", "amd": "--rocm", "none": ""}


def render_site(site) -> str:
    facts = json.dumps(site.smoke_facts.to_json(), sort_keys=True, separators=(",", ":"))
    lines = [
        f"# {site.name}: {site.description}",
        f"# Generated from recipes/sites/{site.name}.yaml by python -m builder render; do not edit.",
        "# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal",
        f"{contract.SITE}={quote(site.name)}",
        f"{contract.RUNTIME_PATH}={quote(site.runtime.path)}",
        "# the module that provides the runtime here, named when none is found",
        f"{contract.RUNTIME_MODULE}={quote(site.runtime.module)}",
        f"{contract.GPU_FLAG}={quote(GPU_FLAGS[site.gpu.vendor])}",
        f"{contract.REQUIRES_JOB}={1 if site.runtime.requires_job else 0}",
        _array(contract.BINDS, site.binds),
        "# staged data (SING_STAGE) goes to the first of these that is set and exists",
        _array(contract.STAGE_ROOTS, filter(None, (site.scratch.node_local, site.scratch.tmpdir))),
        "# folders of each job (scratch.make_dirs), made and handed over when no job script did",
        _array(contract.JOB_DIRS, (f"{name}={folder}" for name, folder in site.dirs_to_make)),
        "# on jobs of more than one node only",
        _array(contract.MULTI_NODE_BINDS, site.multi_node_binds_in_effect),
        _array(contract.MULTI_NODE_ENV, (f"{name}={value}" for name, value in site.multi_node.env)),
        _array(contract.MULTI_NODE_LIBRARY_PATH, site.multi_node_library_path_in_effect),
        f"{contract.MASTER_PORT_BASE}={site.launcher.master_port_base}",
        "# what the smoke suite judges runs here against (python -m smoke reads it at run time)",
        f"{contract.SITE_FACTS}={quote(facts)}",
    ]
    return "\n".join(lines) + "\n"


def _array(name, values) -> str:
    return f"{name}=({' '.join(quote(value) for value in values)})"
