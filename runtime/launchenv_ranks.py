"""Which launcher started this process, and the numbers it gave: rank, local rank, world size
and tasks on this node, each with the variable it came from so that an error can name it.
launchenv.detect() takes these and adds the master's address and port; LaunchError, raised for
a variable that is not as a launcher sets it, lives here as the bottom of launchenv. Standard
library only (and hpcml_contract).

Example: ranks({"SLURM_PROCID": "5", ...}) -> ("slurm", (5, "SLURM_PROCID"), ...)
"""

import re

import hpcml_contract as contract


class LaunchError(RuntimeError):
    """A variable not as a launcher sets it (its message names it), or ranks that disagree."""


def integer(env, name, default=None, *, needed_by=None):
    """The whole number in ``env[name]``; ``default`` when unset (None: it must be set)."""
    value = env.get(name)
    if value is None:
        if default is not None:
            return default
        because = f" (needed with {needed_by})" if needed_by else ""
        raise LaunchError(f"{name} is not set{because}; expected a whole number")
    if not re.fullmatch(r"-?[0-9]+", value):  # ASCII digits only: int() takes more
        raise LaunchError(f"{name}={value!r} is not a whole number")
    return int(value)


def tasks_on_this_node(env):
    """(tasks on this node, where that came from), from SLURM_NTASKS_PER_NODE, else a list
    such as SLURM_STEP_TASKS_PER_NODE='4(x2),3' and SLURM_NODEID, else SLURM_NTASKS."""
    if env.get("SLURM_NTASKS_PER_NODE"):
        return integer(env, "SLURM_NTASKS_PER_NODE"), "SLURM_NTASKS_PER_NODE"
    name = "SLURM_STEP_TASKS_PER_NODE" if env.get("SLURM_STEP_TASKS_PER_NODE") else "SLURM_TASKS_PER_NODE"
    spec = env.get(name)
    if not spec:
        return integer(env, "SLURM_NTASKS", 1), "SLURM_NTASKS"
    item = r"[0-9]+(\(x[1-9][0-9]*\))?"  # 4, or 4(x2): 4 on each of 2 nodes
    if not re.fullmatch(f"{item}(,{item})*", spec):
        raise LaunchError(f"{name}={spec!r} is not a list of task counts; expected such as '4(x2),3'")
    node = integer(env, "SLURM_NODEID", 0)
    if node < 0:
        raise LaunchError(f"SLURM_NODEID={node} is not a node number; expected 0 or more")
    where = f"{name}={spec!r} on SLURM_NODEID={node}"
    tasks = 0
    for count, times in re.findall(r"([0-9]+)(?:\(x([0-9]+)\))?", spec):
        tasks = int(count)
        if node < int(times or 1):
            return tasks, where
        node -= int(times or 1)
    return tasks, where  # a node past the list: its last count


def ranks(env):
    """(source, rank, local_rank, world_size, local_world_size), each number with the name of
    the variable it came from: (value, name)."""

    def read(name, default=None, needed_by=None):
        return integer(env, name, default, needed_by=needed_by), name

    if env.get("TORCHELASTIC_RUN_ID"):
        return ("torchrun", read("RANK"), read("LOCAL_RANK"), read("WORLD_SIZE"), read("LOCAL_WORLD_SIZE"))
    if all(name in env for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE")):
        # The DeepSpeed launcher says LOCAL_SIZE; torch.distributed.launch LOCAL_WORLD_SIZE.
        world = read("WORLD_SIZE")
        local_name = "LOCAL_WORLD_SIZE" if env.get("LOCAL_WORLD_SIZE") else "LOCAL_SIZE"
        local_world = read(local_name) if env.get(local_name) else world
        # set by `python -m launchenv --`, which found them: the launcher behind the variables
        source = env.get(contract.LAUNCHED_BY, "env")
        return source, read("RANK"), read("LOCAL_RANK"), world, local_world
    if "OMPI_COMM_WORLD_RANK" in env:
        return (
            "openmpi",
            read("OMPI_COMM_WORLD_RANK"),
            read("OMPI_COMM_WORLD_LOCAL_RANK"),
            read("OMPI_COMM_WORLD_SIZE"),
            read("OMPI_COMM_WORLD_LOCAL_SIZE"),
        )
    if "PMIX_RANK" in env:
        size_var = next((v for v in ("PMIX_SIZE", "SLURM_NTASKS", "PMI_SIZE") if v in env), None)
        if size_var is None:
            raise LaunchError("PMIX_RANK is set but no world size (PMIX_SIZE or SLURM_NTASKS)")
        local = read("SLURM_LOCALID", 0)
        local_size = tasks_on_this_node(env) if "SLURM_JOB_ID" in env else (1, "PMIX_RANK without Slurm")
        return "pmix", read("PMIX_RANK"), local, read(size_var), local_size
    if "PMI_RANK" in env:
        local = read("MPI_LOCALRANKID") if "MPI_LOCALRANKID" in env else read("SLURM_LOCALID", 0)
        if "MPI_LOCALNRANKS" in env:
            local_size = read("MPI_LOCALNRANKS")
        else:
            local_size = tasks_on_this_node(env) if "SLURM_JOB_ID" in env else (1, "PMI_RANK without Slurm")
        return "pmi", read("PMI_RANK"), local, read("PMI_SIZE", needed_by="PMI_RANK"), local_size
    if "SLURM_PROCID" in env:
        size_var = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in env else "SLURM_NTASKS"
        return ("slurm", read("SLURM_PROCID"), read("SLURM_LOCALID"), read(size_var), tasks_on_this_node(env))
    return "single", (0, "rank"), (0, "local rank"), (1, "world size"), (1, "local world size")


def check_ranks(source, rank, local_rank, world, local_world):
    """Each of ``rank`` ... is (value, the variable it came from)."""

    def show(pair):
        value, name = pair
        return f"{name}={value}" if re.fullmatch(r"[A-Z_]+", name) else f"{value} (from {name})"

    problem = None
    if world[0] < 1:
        problem = f"{show(world)} is not a world size; expected 1 or more"
    elif not 0 <= rank[0] < world[0]:
        problem = f"{show(rank)} is not a rank of {show(world)}; expected 0 to {world[0] - 1}"
    elif not 1 <= local_world[0] <= world[0]:
        problem = f"{show(local_world)} tasks on this node; expected 1 to {show(world)}"
    elif not 0 <= local_rank[0] < local_world[0]:
        problem = (
            f"{show(local_rank)} is not a rank on this node of {show(local_world)}; expected 0 to {local_world[0] - 1}"
        )
    if problem:
        raise LaunchError(f"{source}: inconsistent ranks: {problem}")
