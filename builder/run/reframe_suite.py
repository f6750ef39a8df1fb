"""`hpcml reframe`: the image's checks for the site's own ReFrame runs, as one folder.

Each check is a smoke-suite check run by the job script `hpcml jobscript` writes for it, on
the site's scheduler, under the site's launcher, through the wrapper: what users run. ReFrame
asks Slurm for the same nodes, tasks and options the script's #SBATCH lines name, then runs
the script's body in that allocation. The folder:

    settings.py         ReFrame's configuration of the site (reframe_settings.py)
    hpcml_checks.py     the checks (wrappers/reframe/hpcml_checks.py), tagged production and ml
    hpcml_checks.json   what each check runs, on how many nodes, and what it must show
    jobs/CHECK.sh       the job script each check runs

The checks read hpcml_checks.json beside them, so the folder also works with the site's own
ReFrame configuration (docs/reframe.md).
"""

import json
from dataclasses import dataclass, replace
from pathlib import Path

from hpcml_facts import Reference

from .. import resources
from ..fileio import write_atomic, write_bytes_atomic
from ..recipes.site_model import Site
from ..recipes.tree import RecipeTree
from . import jobscript
from .job_request import Request, seconds
from .reframe_settings import settings

PARAMS = "hpcml_checks.json"
CHECKS_FILE = "hpcml_checks.py"
SETTINGS = "settings.py"
TIME = "00:30:00"  # each check's --time where neither the admin nor the site says one
# what ReFrame writes itself from the check's task counts, time and files
OWNED = {"job-name", "time", "ntasks", "ntasks-per-node", "cpus-per-task", "output", "error", "open-mode"}


@dataclass(frozen=True)
class SmokeCheck:
    """One ReFrame check: a smoke-suite check, and the verdict lines it must print as PASS."""

    name: str  # the smoke suite's check, and the key in hpcml_checks.json
    descr: str
    must_pass: tuple[str, ...]
    across_nodes: bool  # on the nodes asked for; else on one node


CHECKS = (
    SmokeCheck("preflight", "the node's CPU, GPUs and driver against the image", ("preflight torch",), False),
    SmokeCheck("allreduce", "all-reduce values exact, busbw against the site's reference", ("allreduce sum",), True),
    SmokeCheck("ddp", "DDP training, stopped and resumed from its checkpoint", ("ddp",), True),
    SmokeCheck("deepspeed", "DeepSpeed's ops load prebuilt", ("deepspeed ops", "deepspeed op loads"), False),
)


def suite(tree: RecipeTree, target: str, request: Request, scheduler: str) -> dict[str, str]:
    """The folder's files, by relative path: ``request`` as for jobscript (its program unused)."""
    plans, checks = {}, {}
    for check in CHECKS:
        nodes = request.nodes if check.across_nodes else 1
        asked = replace(request, nodes=nodes, time=request.time or TIME, program=("-m", "smoke", check.name))
        plan = jobscript.plan(tree, target, asked)
        reference = pick_reference(plan.site, nodes) if check.name == "allreduce" else None
        if reference:  # the sweep ends at the reference's size
            asked = replace(asked, program=(*asked.program, "--sizes", f"8:{reference['bytes']}"))
            plan = jobscript.plan(tree, target, asked)
        plans[check.name] = plan
        checks[check.name] = _params(check, plan, reference)
    site = plans[CHECKS[0].name].site
    params = {"target": target, "site": site.name, "checks": checks}
    files = {f"jobs/{name}.sh": jobscript.script(plan) for name, plan in plans.items()}
    files[PARAMS] = json.dumps(params, indent=1, sort_keys=True, ensure_ascii=True) + "\n"
    files[SETTINGS] = settings(site, scheduler)
    return files


def pick_reference(site: Site, nodes: int) -> dict | None:
    """The site's all-reduce reference for ``nodes``, as the smoke suite picks it for the
    dtypes it measures by default (all three on GPUs, float32 on CPUs), its tolerance said."""
    dtypes = ("float32", "bfloat16", "float16") if site.gpu.per_node > 0 else ("float32",)
    ref = Reference.for_run([ref.facts() for ref in site.allreduce], nodes, dtypes)
    if ref is None:
        return None
    tolerance = 0.05 if ref.tolerance is None else ref.tolerance
    return {"bytes": ref.bytes, "dtype": ref.dtype or "float32", "busbw_gbs": ref.busbw_gbs, "tolerance": tolerance}


def _params(check: SmokeCheck, plan, reference: dict | None) -> dict:
    placed = plan.placement
    spec = {
        "descr": check.descr,
        "script": f"jobs/{check.name}.sh",
        "nodes": plan.request.nodes,
        "tasks_per_node": placed.tasks_per_node,
        "cpus_per_task": placed.cpus_per_task,
        "time_s": seconds(plan.request.time),
        "options": [f"--{key}={value}" if value else f"--{key}" for key, value in plan.sbatch if key not in OWNED],
        "must_pass": list(check.must_pass),
    }
    if check.name == "allreduce":
        spec["reference"] = reference
    return spec


def write(folder: Path, files: dict[str, str]) -> None:
    """The suite's files and the checks' library into ``folder``; each file atomically."""
    for name, text in sorted(files.items()):
        write_atomic(folder / name, text)  # its folder made as needed
    write_bytes_atomic(folder / CHECKS_FILE, resources.reframe_checks().read_bytes())
