"""How a job script starts its ranks: the training runs through singularity_wrapper,
launched one of four ways:

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

One pass, `launch_for`: the script's last lines (the EXIT trap, the launch line) and why.
"""

from dataclasses import dataclass

from ..recipes.site_model import Site
from ..values.shell import cmd
from .job_environment import Steps, per_node
from .job_placement import Placement
from .job_request import Request

LAUNCHES = ("torchrun", "srun", "mpirun", "deepspeed")
# One task's failure ends the step: without it, the ranks that lost a peer exit but srun
# waits for the tasks of a dead node until slurmctld marks it down (SlurmdTimeout, minutes).
KILL_ON_BAD_EXIT = "--kill-on-bad-exit=1"
RDZV_PORT = 29400
# Above the launch line of `--launch deepspeed` on more than one node: what runs is srun's.
DEEPSPEED_ACROSS_NODES = (
    "# --launch deepspeed across nodes runs what --launch srun runs: one task per rank, and",
    "# launchenv gives each RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR (the first node) and",
    "# MASTER_PORT from Slurm, which deepspeed.init_distributed() takes as they are: neither",
    "# DeepSpeed's launcher (ssh) nor its MPI discovery runs.",
)


@dataclass(frozen=True)
class Launch:
    """The script's lines after the steps' own, the launch line last, and why."""

    lines: tuple[str, ...]
    why: tuple[str, ...]


def launch_for(
    site: Site, request: Request, mode: str, placed: Placement, steps: Steps, wrapper: str, program: tuple[str, ...]
) -> Launch:
    """How ``mode`` (one of LAUNCHES) starts ``program`` (Paths.program) through ``wrapper``."""
    why = []
    # the site's masks give each GPU's task its nearest cores; they describe a whole node
    masks = site.cpu.cpu_bind and placed.gpus == site.gpu.per_node and placed.tasks_per_node == placed.ranks_per_node
    if masks:
        why.append("CPU binding: the site's masks, nearest cores to each GPU (cpu.cpu_bind)")
    lines = []
    on_exit = list(steps.on_exit)
    if request.stage:
        # the copies go when the script ends, not at the next job on each node
        lines.append("unstage() { " + per_node(steps.srun) + " " + cmd(wrapper, "unstage") + " || true; }")
        on_exit.append("unstage")
        why.append("staged copies removed on each node when the script ends (trap unstage EXIT)")
    if on_exit:  # one trap: a second `trap ... EXIT` would replace the first
        lines.append(f"trap '{'; '.join(on_exit)}' EXIT")
    bind = [f"--cpu-bind={site.cpu.cpu_bind}"] if masks else []
    before, line, line_why = _launch_line(site, request.nodes, mode, placed, steps, wrapper, program, bind)
    if line.startswith("srun"):
        line_why += ("srun --kill-on-bad-exit=1: a rank that fails ends the step, none waits for a dead node",)
    return Launch(lines=(*lines, *before, line), why=(*why, *line_why))


def _launch_line(
    site: Site,
    nodes: int,
    mode: str,
    placed: Placement,
    steps: Steps,
    wrapper: str,
    program: tuple[str, ...],
    bind: list[str],
) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """(the lines the launch line needs above it, the launch line, why)."""
    wrapped = [wrapper, "exec"]
    step = [*steps.srun, KILL_ON_BAD_EXIT]  # the srun of every launch
    ranks = ["python", "-m", "launchenv", "--", "python", *program]
    # the site's MPI plugin on every srun of ranks, whatever Slurm's default: MPI starts
    mpi = [f"--mpi={site.mpi.slurm_mpi}"] if site.mpi.slurm_mpi != "none" else []
    if mode == "torchrun":
        return _torchrun_line(nodes, placed.ranks_per_node, [*step, *wrapped], program)
    if mode == "deepspeed" and nodes > 1:
        why = "launch deepspeed across nodes: the srun launch, ranks from launchenv; "
        why += "DeepSpeed's launcher and its MPI discovery do not run"
        return DEEPSPEED_ACROSS_NODES, cmd(*step, *mpi, *bind, *wrapped, *ranks), (why,)
    if mode == "srun":
        why = "launch srun: one task per rank, launchenv sets the ranks"
        why += f"; --mpi={site.mpi.slurm_mpi} lets MPI in the program start" if mpi else ""
        return (), cmd(*step, *mpi, *bind, *wrapped, *ranks), (why,)
    if mode == "mpirun" and mpi:
        why = f"launch mpirun: srun --mpi={site.mpi.slurm_mpi} starts the MPI ranks (hybrid model)"
        return (), cmd(*step, *mpi, *bind, *wrapped, *ranks), (why,)
    if mode == "mpirun":
        line = 'mpirun -np "$SLURM_NTASKS" '
        line += cmd("--map-by", f"ppr:{placed.ranks_per_node}:node", *wrapped, *ranks)
        return (), line, ("launch mpirun: the host's mpirun (Slurm here has no MPI plugin)",)
    module = ["--module", *program[1:]] if program[0] == "-m" else program
    line = cmd(*step, *wrapped, "deepspeed", f"--num_gpus={placed.ranks_per_node}", *module)
    return (), line, ("launch deepspeed: its launcher in one task, a rank per GPU",)


def _torchrun_line(
    nodes: int, ranks_per_node: int, launched: list[str], program: tuple[str, ...]
) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """torchrun in one task (``launched``: the srun and the wrapper that start it): --standalone
    on one node; across nodes one task per node, with c10d rendezvous on the first."""
    if nodes == 1:
        line = cmd(*launched, "torchrun", "--standalone", "--nnodes=1", f"--nproc-per-node={ranks_per_node}", *program)
        return (), line, ("launch torchrun: one task, --standalone, a rank per GPU",)
    line = (
        cmd(*launched, "torchrun")
        + ' --nnodes="$SLURM_JOB_NUM_NODES" '
        + cmd(f"--nproc-per-node={ranks_per_node}")
        + ' --rdzv-id="$SLURM_JOB_ID" '
        + f'--rdzv-backend=c10d --rdzv-endpoint="$rdzv_host:{RDZV_PORT}" '
        + cmd(*program)
    )
    before = ('rdzv_host="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',)
    return before, line, ("launch torchrun: one task per node, c10d rendezvous on the first node",)
