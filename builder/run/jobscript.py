"""`builder jobscript`: the Slurm batch script for a target on one of its sites.

Everything comes from the site file: the GPU request in the site's own form (gres with a GPU
type, or --gpus-per-node), the first partition in the site's order of preference that fits
(test partitions only when named), cores per task from the cores per GPU, memory by the
site's rule, its CPU masks, QoS, constraint, extra sbatch options and default --time, the
srun options of its multi-node jobs and the node-local folders it makes first. The training
runs through singularity_wrapper, launched one of four ways (job_launch.py).

The Plan is made in passes, one per concern, each a function that returns a frozen record of
its own: placement (job_placement.py), then environment, storage and steps
(job_environment.py), then paths (job_paths.py), then the launch (job_launch.py); `script`
writes the Plan out.
"""

from dataclasses import dataclass, replace

from .. import __version__, contract
from ..errors import did_you_mean
from ..recipes.site_model import Site
from ..recipes.target_model import Target
from ..recipes.tree import RecipeTree
from ..render.templating import templates
from ..values.check import directive
from ..values.shell import export, path_value, quote
from .job_environment import Environment, environment_for, steps_for, storage_for
from .job_launch import LAUNCHES, launch_for
from .job_paths import Paths, image_hint, paths_for, variable_checks
from .job_placement import Placement, placement_for
from .job_request import Request, command_line_error

TIME = "01:00:00"  # --time where neither the user nor the site (slurm.time) says one


@dataclass(frozen=True)
class Plan:
    """Everything the script says: the passes' records, and what they add up to."""

    target: Target
    site: Site
    request: Request  # with its time filled in
    launch: str  # one of LAUNCHES
    placement: Placement
    environment: Environment
    paths: Paths
    sbatch: tuple[tuple[str, str], ...]  # the placement's options, and the storage's
    node_local: str  # HPCML_NODE_LOCAL as the script sets it ("" for none): where staged copies go
    launch_lines: tuple[str, ...]  # the steps' lines, then the launch's
    why: tuple[str, ...]  # the comment block: what was chosen, why, in the passes' order
    notes: tuple[str, ...]  # said on stderr: what was changed in the request, what was not checked

    @property
    def module_lines(self) -> tuple[str, ...]:
        return self.environment.module_lines

    @property
    def cpus_per_task(self) -> int:
        return self.placement.cpus_per_task

    def summary(self) -> str:
        placed = self.placement
        part = placed.partition.name if placed.partition else "default partition"
        gpus = f"{placed.gpus} GPU(s)/node" if placed.gpus else "no GPU"
        mem = f", mem {placed.mem}" if placed.mem else ""
        qos = next((f" (QoS {value})" for key, value in self.sbatch if key == "qos"), "")
        launch = self.launch
        if launch == "deepspeed" and self.request.nodes > 1:
            launch += " (as srun: ranks from launchenv, no DeepSpeed launcher)"
        return (
            f"{self.site.name}: {part}{qos}, {self.request.nodes} node(s), {gpus}, "
            f"{placed.tasks_per_node} task(s)/node x {self.cpus_per_task} cores{mem}, "
            f"launch {launch}"
        )


def plan(tree: RecipeTree, target_name: str, request: Request) -> Plan:
    """Choose everything the script says; one clear error for a request the site cannot serve."""
    target, site, launch = _chosen(tree, target_name, request)
    timed = _with_time(request, site)
    placement = placement_for(site, target, timed, launch)
    environment = environment_for(site, target, timed, launch)
    storage = storage_for(site, timed, placement.gpus)
    steps = steps_for(site, timed.nodes, launch)
    paths = paths_for(timed)
    launched = launch_for(site, timed, launch, placement, steps, environment.wrapper, paths.program)
    # the one reason no pass gives: the request left its time to the site
    time_why = (
        () if request.time or not site.slurm.time else (f"time {site.slurm.time}: the site's default (slurm.time)",)
    )
    return Plan(
        target=target,
        site=site,
        request=timed,
        launch=launch,
        placement=placement,
        environment=environment,
        paths=paths,
        sbatch=storage.placed_in(placement.sbatch),
        node_local=storage.node_local,
        launch_lines=steps.lines + launched.lines,
        why=time_why + placement.why + environment.why + storage.why + steps.why + launched.why,
        notes=environment.notes + storage.notes + paths.notes,
    )


def _chosen(tree: RecipeTree, target_name: str, request: Request) -> tuple[Target, Site, str]:
    """The target, the site and the launch mode the request names, or their defaults."""
    target = tree.target(target_name)
    sites = {site.name: site for site in target.sites}
    site = sites.get(request.site or next(iter(sites)))
    if site is None:
        site = tree.site(request.site)  # one line, with "did you mean", when unknown
        _check_archs(target, site)
    launch = request.launch or site.launcher.default
    if launch not in LAUNCHES:
        raise command_line_error(
            f"unknown launch mode {launch!r}; expected one of: {', '.join(LAUNCHES)}" + did_you_mean(launch, LAUNCHES)
        )
    if request.nodes < 1:
        raise command_line_error(f"--nodes {request.nodes}: expected 1 or more")
    return target, site, launch


def _with_time(request: Request, site: Site) -> Request:
    """The request with its time filled in, so that the script's header and its #SBATCH
    line name the same time."""
    return replace(request, time=request.time or site.slurm.time or TIME)


def _check_archs(target: Target, site: Site):
    """Another site than the target's own: fine when the image holds code for its GPUs."""
    missing = [arch for arch in site.gpu.arch if arch not in target.archs]
    if missing or (target.archs and not site.gpu.arch):
        held = ", ".join(target.archs) or "no GPU code"
        wanted = ", ".join(site.gpu.arch) or "no GPU"
        raise command_line_error(f"target {target.name} is built for {held}; site {site.name} has {wanted}")


def script(p: Plan) -> str:
    site, request, environment = p.site, p.request, p.environment
    exports = [(contract.SITE, site.name)]
    if request.binds:
        exports.append(("SING_BIND", ",".join(p.paths.binds)))
    if request.stage:
        exports.append(("SING_STAGE", ",".join(p.paths.stage)))
    exports.append(("OMP_NUM_THREADS", str(p.placement.cores_per_rank)))
    # the ranks' output reaches the job's log as it is printed, not when a buffer fills
    exports.append(("PYTHONUNBUFFERED", "1"))
    # the image first; its path may start with a site variable, expanded when the job runs
    image = environment.image
    lines = [*variable_checks(image, site), f"export SING_IMAGE={path_value(image)}"] if image else []
    lines += [f"export {name}={quote(value)}" for name, value in exports]
    if environment.pyenv:  # like the image's, its path may start with a site variable
        lines += [
            *variable_checks(environment.pyenv, site, "the project env"),
            f"export SING_PYENV={path_value(environment.pyenv)}",
        ]
    if p.node_local:  # its variables expand when the job runs
        lines.append(export(contract.NODE_LOCAL, p.node_local))
    account_hint = "" if request.account or not site.slurm.account else site.slurm.account.example
    where = f"recipes/sites/{site.name}.yaml"  # the user's values were checked where they were read
    published = environment.published
    return templates.get_template("job.sh.j2").render(
        directives=[directive(option, value, where) for option, value in p.sbatch],
        version=__version__,
        command=request.command_line(p.target.name),
        plan=p,
        exports=lines,
        account_hint=account_hint,
        wrapper=quote(environment.wrapper),
        image_hint=image_hint(site, p.target, published.module if published and not request.image else ""),
    )
