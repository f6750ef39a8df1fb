"""`builder jobscript`: the Slurm batch script for a target on one of its sites.

Everything comes from the site file: the GPU request in the site's own form (gres with a GPU
type, or --gpus-per-node), the first partition in the site's order of preference that fits
(test partitions only when named), cores per task from the cores per GPU, memory by the
site's rule, its CPU masks, QoS, constraint, extra sbatch options and default --time, the
srun options of its multi-node jobs and the node-local folders it makes first. The training
runs through singularity_wrapper, launched one of four ways:

  torchrun   one task per node; torchrun starts a rank per GPU (c10d rendezvous on the
             first node across nodes, --standalone on one)
  srun       one task per GPU; launchenv turns Slurm's variables into torch's
  mpirun     one task per GPU started by MPI: srun --mpi=<site's plugin> (the hybrid model),
             or the host's mpirun where Slurm has no MPI plugin
  deepspeed  on one node, DeepSpeed's launcher (`deepspeed --num_gpus=N`) in one task; across
             nodes the srun launch itself: one task per GPU, launchenv sets RANK, LOCAL_RANK,
             WORLD_SIZE, MASTER_ADDR (the first node) and MASTER_PORT from Slurm, and
             deepspeed.init_distributed() takes them as they are, so neither DeepSpeed's
             launcher (its ssh) nor its MPI discovery runs
"""

from dataclasses import dataclass, field, replace

from .. import __version__, contract
from ..render.templating import templates
from ..safe_text import directive
from ..shell import cmd, export, path_value, quote
from ..suggest import did_you_mean
from .job_environment import environment, per_node, steps, storage
from .job_paths import data_paths, image_hint, variable_checks
from .job_paths import program as program_words
from .job_placement import choose_partition, command_line_error, resources, size

LAUNCHES = ("torchrun", "srun", "mpirun", "deepspeed")
# One task's failure ends the step: without it, the ranks that lost a peer exit but srun
# waits for the tasks of a dead node until slurmctld marks it down (SlurmdTimeout, minutes).
KILL_ON_BAD_EXIT = "--kill-on-bad-exit=1"
RDZV_PORT = 29400
TIME = "01:00:00"  # --time where neither the user nor the site (slurm.time) says one
# Above the launch line of `--launch deepspeed` on more than one node: what runs is srun's.
DEEPSPEED_ACROSS_NODES = (
    "# --launch deepspeed across nodes runs what --launch srun runs: one task per rank, and",
    "# launchenv gives each RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR (the first node) and",
    "# MASTER_PORT from Slurm, which deepspeed.init_distributed() takes as they are: neither",
    "# DeepSpeed's launcher (ssh) nor its MPI discovery runs.",
)


@dataclass(frozen=True)
class Request:
    """What the user asked for on the command line."""

    site: str = ""  # default: the target's first site
    nodes: int = 1
    gpus: int = 0  # per node; 0: every GPU of a node
    tasks_per_node: int = 0  # CPU sites: ranks per node (default 1)
    launch: str = ""  # default: the site's launcher
    time: str = ""  # default: the site's slurm.time, else TIME
    account: str = ""
    partition: str = ""
    qos: str = ""  # default: the first of the site's QoS that fits
    binds: tuple = ()
    stage: tuple = ()
    nvme_pool: str = ""  # SIZE of the site's pool (scratch.pool) on each node; "" for none
    image: str = ""  # default: the published module's, the site's image folder's
    # <target>.sif, or images/<target>.sif
    published: str = ""  # a publish record (PREFIX/NAME/VERSION): the script loads it
    wrapper: str = ""  # default: singularity_wrapper of the published module, else
    # this install's, by its absolute path
    program: tuple = ()  # train.py --epochs 10, or -m smoke all
    folder: str = ""  # where relative paths (image, program) are from; "" keeps them as given

    def command_line(self, target) -> str:
        """The jobscript command that asks for this, options in a fixed order."""
        words = [target]
        for option, value in (
            ("--site", self.site),
            ("--nodes", self.nodes),
            ("--gpus", self.gpus),
            ("--tasks-per-node", self.tasks_per_node),
            ("--launch", self.launch),
            ("--time", self.time),
            ("--account", self.account),
            ("--partition", self.partition),
            ("--qos", self.qos),
            ("--nvme-pool", self.nvme_pool),
            ("--image", self.image),
            ("--published", self.published),
        ):
            if value:
                words += [option, str(value)]
        for option, values in (("--bind", self.binds), ("--stage", self.stage)):
            for value in values:
                words += [option, value]
        return cmd(*words, "--", *self.program)


@dataclass
class Plan:
    target: object
    site: object
    request: Request
    launch: str
    partition: object = None  # Partition, or None for the cluster's default
    gpus: int = 0  # per node
    ranks_per_node: int = 1
    tasks_per_node: int = 1  # Slurm tasks: 1 under torchrun and the one-node launcher
    cores_per_rank: int = 1
    mem: str = ""  # --mem value, "" for none
    sbatch: list = field(default_factory=list)  # [(option, value), ...]
    why: list = field(default_factory=list)  # the comment block: what was chosen, why
    launch_lines: list = field(default_factory=list)
    on_exit: list = field(default_factory=list)  # shell functions the script's EXIT trap calls
    notes: list = field(default_factory=list)  # said on stderr: what was changed in the request
    module_lines: list = field(default_factory=list)  # module purge/use/load, before anything runs
    image: str = ""  # SING_IMAGE as the script sets it ("" when the module does)
    node_local: str = ""  # HPCML_NODE_LOCAL as the script sets it: where staged copies go
    wrapper: str = ""  # the command that runs the container
    srun: tuple = ("srun",)  # what every srun step starts with: the site's options across nodes
    record: dict = field(default_factory=dict)  # the publish record loaded, when one is

    @property
    def cpus_per_task(self):
        return self.cores_per_rank * self.ranks_per_node // self.tasks_per_node

    def summary(self) -> str:
        part = self.partition.name if self.partition else "default partition"
        gpus = f"{self.gpus} GPU(s)/node" if self.gpus else "no GPU"
        mem = f", mem {self.mem}" if self.mem else ""
        qos = next((f" (QoS {value})" for key, value in self.sbatch if key == "qos"), "")
        launch = self.launch
        if launch == "deepspeed" and self.request.nodes > 1:
            launch += " (as srun: ranks from launchenv, no DeepSpeed launcher)"
        return (
            f"{self.site.name}: {part}{qos}, {self.request.nodes} node(s), {gpus}, "
            f"{self.tasks_per_node} task(s)/node x {self.cpus_per_task} cores{mem}, "
            f"launch {launch}"
        )


def plan(tree, target_name, request: Request) -> Plan:
    """Choose everything the script says; one clear error for a request the site cannot serve."""
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
    result = Plan(target, site, _with_time(request, site), launch)
    if not request.time and site.slurm.time:
        result.why.append(f"time {site.slurm.time}: the site's default (slurm.time)")
    size(result)
    choose_partition(result)
    resources(result)
    environment(result)
    storage(result)
    steps(result)
    _launch(result)
    return result


def _with_time(request: Request, site) -> Request:
    """The request with its time filled in, so that the script's header and its #SBATCH
    line name the same time."""
    return replace(request, time=request.time or site.slurm.time or TIME)


def _check_archs(target, site):
    """Another site than the target's own: fine when the image holds code for its GPUs."""
    missing = [arch for arch in site.gpu.arch if arch not in target.archs]
    if missing or (target.archs and not site.gpu.arch):
        held = ", ".join(target.archs) or "no GPU code"
        wanted = ", ".join(site.gpu.arch) or "no GPU"
        raise command_line_error(f"target {target.name} is built for {held}; site {site.name} has {wanted}")


def _launch(p: Plan):
    site, request = p.site, p.request
    wrapper = [p.wrapper, "exec"]
    step = [*p.srun, KILL_ON_BAD_EXIT]  # the srun of every launch
    program = program_words(p)
    # the site's masks give each GPU's task its nearest cores; they describe a whole node
    masks = site.cpu.cpu_bind and p.gpus == site.gpu.per_node and p.tasks_per_node == p.ranks_per_node
    bind = [f"--cpu-bind={site.cpu.cpu_bind}"] if masks else []
    if masks:
        p.why.append("CPU binding: the site's masks, nearest cores to each GPU (cpu.cpu_bind)")
    ranks = ["python", "-m", "launchenv", "--", "python", *program]
    # the site's MPI plugin on every srun of ranks, whatever Slurm's default: MPI starts
    mpi = [f"--mpi={site.mpi.slurm_mpi}"] if site.mpi.slurm_mpi != "none" else []
    nodes = request.nodes
    if request.stage:
        # the copies go when the script ends, not at the next job on each node
        p.launch_lines.append("unstage() { " + per_node(p) + " " + cmd(p.wrapper, "unstage") + " || true; }")
        p.on_exit.append("unstage")
        p.why.append("staged copies removed on each node when the script ends (trap unstage EXIT)")
    if p.on_exit:  # one trap: a second `trap ... EXIT` would replace the first
        p.launch_lines.append(f"trap '{'; '.join(p.on_exit)}' EXIT")
    if p.launch == "torchrun":
        line = _torchrun_line(p, [*step, *wrapper], program)
    elif p.launch == "srun" or (p.launch == "deepspeed" and nodes > 1):
        line = cmd(*step, *mpi, *bind, *wrapper, *ranks)
        if p.launch == "deepspeed":
            p.why.append(
                "launch deepspeed across nodes: the srun launch, ranks from launchenv; "
                "DeepSpeed's launcher and its MPI discovery do not run"
            )
            p.launch_lines += DEEPSPEED_ACROSS_NODES
        else:
            p.why.append(
                "launch srun: one task per rank, launchenv sets the ranks"
                + (f"; --mpi={site.mpi.slurm_mpi} lets MPI in the program start" if mpi else "")
            )
    elif p.launch == "mpirun":
        if mpi:
            line = cmd(*step, *mpi, *bind, *wrapper, *ranks)
            p.why.append(f"launch mpirun: srun --mpi={site.mpi.slurm_mpi} starts the MPI ranks (hybrid model)")
        else:
            line = 'mpirun -np "$SLURM_NTASKS" ' + cmd("--map-by", f"ppr:{p.ranks_per_node}:node", *wrapper, *ranks)
            p.why.append("launch mpirun: the host's mpirun (Slurm here has no MPI plugin)")
    else:
        module = ["--module", *program[1:]] if program[0] == "-m" else program
        line = cmd(*step, *wrapper, "deepspeed", f"--num_gpus={p.ranks_per_node}", *module)
        p.why.append("launch deepspeed: its launcher in one task, a rank per GPU")
    if line.startswith("srun"):
        p.why.append("srun --kill-on-bad-exit=1: a rank that fails ends the step, none waits for a dead node")
    p.launch_lines.append(line)


def _torchrun_line(p: Plan, launched, program) -> str:
    """torchrun in one task (``launched``: the srun and the wrapper that start it): --standalone
    on one node; across nodes one task per node, with c10d rendezvous on the first."""
    if p.request.nodes == 1:
        p.why.append("launch torchrun: one task, --standalone, a rank per GPU")
        return cmd(
            *launched, "torchrun", "--standalone", "--nnodes=1", f"--nproc-per-node={p.ranks_per_node}", *program
        )
    p.launch_lines.append('rdzv_host="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"')
    p.why.append("launch torchrun: one task per node, c10d rendezvous on the first node")
    return (
        cmd(*launched, "torchrun")
        + ' --nnodes="$SLURM_JOB_NUM_NODES" '
        + cmd(f"--nproc-per-node={p.ranks_per_node}")
        + ' --rdzv-id="$SLURM_JOB_ID" '
        + f'--rdzv-backend=c10d --rdzv-endpoint="$rdzv_host:{RDZV_PORT}" '
        + cmd(*program)
    )


def script(p: Plan) -> str:
    site, request = p.site, p.request
    exports = [(contract.SITE, site.name)]
    if request.binds:
        exports.append(("SING_BIND", ",".join(data_paths(request.binds, request.folder))))
    if request.stage:
        exports.append(("SING_STAGE", ",".join(data_paths(request.stage, request.folder))))
    exports.append(("OMP_NUM_THREADS", str(p.cores_per_rank)))
    # the ranks' output reaches the job's log as it is printed, not when a buffer fills
    exports.append(("PYTHONUNBUFFERED", "1"))
    # the image first; its path may start with a site variable, expanded when the job runs
    lines = [*variable_checks(p), f"export SING_IMAGE={path_value(p.image)}"] if p.image else []
    lines += [f"export {name}={quote(value)}" for name, value in exports]
    if p.node_local:  # its variables expand when the job runs
        lines.append(export(contract.NODE_LOCAL, p.node_local))
    account_hint = "" if request.account or not site.slurm.account else site.slurm.account.example
    where = f"recipes/sites/{site.name}.yaml"  # the user's values were checked where they were read
    return templates.get_template("job.sh.j2").render(
        directives=[directive(option, value, where) for option, value in p.sbatch],
        version=__version__,
        command=request.command_line(p.target.name),
        plan=p,
        exports=lines,
        account_hint=account_hint,
        wrapper=quote(p.wrapper),
        image_hint=image_hint(p),
    )
