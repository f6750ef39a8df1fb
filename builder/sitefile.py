"""The shell settings file a site's wrapper reads (wrappers/sites/<site>.sh).

Bash cannot read YAML, so each site file is rendered into shell assignments, committed like
the .def files and checked for staleness the same way. Paths such as `$TMPDIR` stay literal
here; the wrapper looks the variable up when it runs and never evaluates the text.
"""

from .shell import quote

GPU_FLAGS = {"nvidia": "--nv", "amd": "--rocm", "none": ""}


def render_site(site) -> str:
    data = site.data
    runtime = data["runtime"]
    multi = data.get("multi_node", {})
    lines = [
        f"# {site.name}: {site.description}",
        f"# Generated from recipes/sites/{site.name}.yaml by python -m builder render; do not edit.",
        "# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal",
        f"HPCML_SITE={quote(site.name)}",
        f"HPCML_RUNTIME_PATH={quote(runtime.get('path', ''))}",
        f"HPCML_GPU_FLAG={quote(GPU_FLAGS[site.gpu_vendor])}",
        f"HPCML_REQUIRES_JOB={1 if runtime.get('requires_job') else 0}",
        f"HPCML_BINDS=({' '.join(quote(b) for b in site.binds)})",
        f"HPCML_MULTI_NODE_BINDS=({' '.join(quote(b) for b in multi.get('binds', []))})",
        f"HPCML_MASTER_PORT_BASE={data.get('launcher', {}).get('master_port_base', 10000)}",
    ]
    return "\n".join(lines) + "\n"
