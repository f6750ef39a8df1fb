"""Turn whatever launched this process into the variables torch.distributed reads.

    import launchenv; launchenv.apply()      # then init_process_group(init_method="env://")
    python -m launchenv                       # print the result as shell exports
    python -m launchenv -- CMD ARGS...        # run CMD with the variables set

Sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT. The first
launcher found wins, in this order (a later one can be running around an earlier one, as
Slurm runs around `srun torchrun` and `mpirun` inside an allocation):

  1. torchrun (TORCHELASTIC_RUN_ID): its own variables are kept as they are
  1b. any other env:// launcher (the DeepSpeed launcher, a hand-started rank): RANK,
      LOCAL_RANK and WORLD_SIZE already set are kept as they are
  2. Open MPI (OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE, _LOCAL_SIZE)
  3. PMIx (PMIX_RANK, with PMIX_SIZE or the Slurm/MPI sizes)
  4. MPICH / PMI (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS)
  5. Slurm, one task per GPU (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, tasks per node)
  6. nothing: a single process (rank 0 of 1)

MASTER_ADDR, when not set already: the first host of SLURM_STEP_NODELIST (else, and always
under Open MPI, whose ranks sit in several steps, SLURM_JOB_NODELIST), expanded here because
`scontrol` is not inside the container; with every rank on one node, 127.0.0.1. MASTER_PORT, when not set already: HPCML_MASTER_PORT_BASE
(default 10000) plus a number from the job id and the step id (10 x job id modulo 2000, plus
the step id, or Open MPI's job id, modulo 10), so neither two jobs sharing a node nor two steps of one allocation
running at once collide. On more than one node, `python -m launchenv` stops with one line
(exit status 2) when MASTER_ADDR does not resolve on this node.
Standard library only: it runs in any image.
"""

import os
import re
import socket
import sys
from dataclasses import dataclass

VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
SOURCE_VARIABLE = "HPCML_LAUNCHED_BY"


class LaunchError(RuntimeError):
    pass


@dataclass(frozen=True)
class Launch:
    source: str
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int

    def variables(self):
        return {"RANK": str(self.rank), "LOCAL_RANK": str(self.local_rank),
                "WORLD_SIZE": str(self.world_size), "LOCAL_WORLD_SIZE": str(self.local_world_size),
                "MASTER_ADDR": self.master_addr, "MASTER_PORT": str(self.master_port)}


def expand_hostlist(expression):
    """Slurm hostlist syntax: 'nid[005-007,012],gpu-x1' -> nid005 nid006 nid007 nid012 gpu-x1."""
    hosts = []
    for item in _split_top_level(expression.strip()):
        hosts += _expand_item(item)
    return hosts


def _split_top_level(text):
    items, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0:
            raise LaunchError(f"bad hostlist {text!r}: ']' without '['")
        current += char
    if depth:
        raise LaunchError(f"bad hostlist {text!r}: '[' without ']'")
    return [item for item in items + [current] if item]


def _expand_item(item):
    match = re.search(r"\[([^\]]*)\]", item)
    if not match:
        return [item]
    head, tail = item[: match.start()], item[match.end():]
    out = []
    for part in match.group(1).split(","):
        bounds = part.split("-")
        if len(bounds) == 1 and bounds[0].isdigit():
            numbers = [bounds[0]]
        elif len(bounds) == 2 and all(b.isdigit() for b in bounds) and int(bounds[0]) <= int(bounds[1]):
            width = len(bounds[0])
            numbers = [str(n).zfill(width) for n in range(int(bounds[0]), int(bounds[1]) + 1)]
        else:
            raise LaunchError(f"bad hostlist range {part!r} in {item!r}")
        for number in numbers:
            out += _expand_item(head + number + tail)   # later bracket groups, if any
    return out


def _tasks_on_this_node(env):
    """Tasks on this node from SLURM_STEP_TASKS_PER_NODE such as '4(x2),3'."""
    if env.get("SLURM_NTASKS_PER_NODE", "").isdigit():
        return int(env["SLURM_NTASKS_PER_NODE"])
    spec = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
    if not spec:
        return int(env.get("SLURM_NTASKS", "1"))
    counts = []
    for part in spec.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part)
        if not match:
            raise LaunchError(f"cannot read SLURM_STEP_TASKS_PER_NODE={spec!r}")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    node = int(env.get("SLURM_NODEID", "0"))
    return counts[node] if node < len(counts) else counts[-1]


def _integer(env, name):
    value = env.get(name, "")
    if not value.lstrip("-").isdigit():
        raise LaunchError(f"{name}={value!r} is not a whole number")
    return int(value)


def _ranks(env):
    """(source, rank, local_rank, world_size, local_world_size)."""
    if env.get("TORCHELASTIC_RUN_ID"):
        return ("torchrun", _integer(env, "RANK"), _integer(env, "LOCAL_RANK"),
                _integer(env, "WORLD_SIZE"), _integer(env, "LOCAL_WORLD_SIZE"))
    if all(name in env for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE")):
        # The DeepSpeed launcher says LOCAL_SIZE; torch.distributed.launch LOCAL_WORLD_SIZE.
        world = _integer(env, "WORLD_SIZE")
        local_size = env.get("LOCAL_WORLD_SIZE") or env.get("LOCAL_SIZE")
        local_world = _integer({"n": local_size}, "n") if local_size else world
        # set by `python -m launchenv --`, which found them: the launcher behind the variables
        source = env.get(SOURCE_VARIABLE, "env")
        return source, _integer(env, "RANK"), _integer(env, "LOCAL_RANK"), world, local_world
    if "OMPI_COMM_WORLD_RANK" in env:
        return ("openmpi", _integer(env, "OMPI_COMM_WORLD_RANK"),
                _integer(env, "OMPI_COMM_WORLD_LOCAL_RANK"), _integer(env, "OMPI_COMM_WORLD_SIZE"),
                _integer(env, "OMPI_COMM_WORLD_LOCAL_SIZE"))
    if "PMIX_RANK" in env:
        size_var = next((v for v in ("PMIX_SIZE", "SLURM_NTASKS", "PMI_SIZE") if v in env), None)
        if size_var is None:
            raise LaunchError("PMIX_RANK is set but no world size (PMIX_SIZE or SLURM_NTASKS)")
        local = _integer(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0
        local_size = _tasks_on_this_node(env) if "SLURM_JOB_ID" in env else 1
        return "pmix", _integer(env, "PMIX_RANK"), local, _integer(env, size_var), local_size
    if "PMI_RANK" in env:
        local = int(env.get("MPI_LOCALRANKID", env.get("SLURM_LOCALID", "0")))
        local_size = int(env.get("MPI_LOCALNRANKS", _tasks_on_this_node(env) if "SLURM_JOB_ID" in env else 1))
        return "pmi", _integer(env, "PMI_RANK"), local, _integer(env, "PMI_SIZE"), local_size
    if "SLURM_PROCID" in env:
        size_var = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in env else "SLURM_NTASKS"
        return ("slurm", _integer(env, "SLURM_PROCID"), _integer(env, "SLURM_LOCALID"),
                _integer(env, size_var), _tasks_on_this_node(env))
    return "single", 0, 0, 1, 1


def detect(env=None):
    """The Launch this process is part of, from ``env`` (default: os.environ)."""
    env = dict(os.environ if env is None else env)
    source, rank, local_rank, world, local_world = _ranks(env)
    if not (0 <= rank < world and 0 <= local_rank < local_world <= world):
        raise LaunchError(f"{source}: inconsistent ranks (rank {rank} of {world}, "
                          f"local {local_rank} of {local_world})")
    # Open MPI's mpirun starts its ranks on the first node itself (in the batch step) and on
    # the others through `srun` steps of one node each: there, only the job's node list and
    # id are the same on every node. The other launchers' ranks are tasks of one step.
    one_step = source != "openmpi"
    master = env.get("MASTER_ADDR")
    if not master:
        nodelist = (one_step and env.get("SLURM_STEP_NODELIST")) or env.get("SLURM_JOB_NODELIST")
        if nodelist:
            master = expand_hostlist(nodelist)[0]
        elif local_world == world:
            master = "127.0.0.1"
        else:
            raise LaunchError(f"{source}: ranks span several nodes and no MASTER_ADDR or Slurm "
                              "node list is set; export MASTER_ADDR=<first node>")
    port = env.get("MASTER_PORT")
    if not port:
        job = env.get("SLURM_JOB_ID") or env.get("OMPI_MCA_ess_base_jobid") or ""
        base = int(env.get("HPCML_MASTER_PORT_BASE", "10000"))
        step = env.get("SLURM_STEP_ID", "0") if one_step else env.get("OMPI_MCA_ess_base_jobid", "0")
        step = int(step) % 10 if step.isdigit() else 0
        port = str(base + int(job) % 2000 * 10 + step) if job.isdigit() else "29500"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise LaunchError(f"MASTER_PORT={port!r} is not a port number")
    return Launch(source, rank, local_rank, world, local_world, master, int(port))


def apply(env=None):
    """Detect, then export the six variables into ``env`` (default: os.environ)."""
    target = os.environ if env is None else env
    launch = detect(target)
    target.update(launch.variables())
    return launch


def check_master_resolves(launch):
    """Ranks on other nodes must find the master by name: say so here, at once and in one
    line, rather than after the rendezvous timeout (minutes) with torch's retry messages."""
    if launch.world_size == launch.local_world_size:
        return                                     # one node: the master is this machine
    try:
        socket.getaddrinfo(launch.master_addr, launch.master_port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise LaunchError(f"rank {launch.rank} on {socket.gethostname()}: MASTER_ADDR "
                          f"{launch.master_addr!r} does not resolve here ({error.strerror}); every "
                          "node must resolve it (DNS or /etc/hosts), or set MASTER_ADDR to an address")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        launch = apply()
        check_master_resolves(launch)
    except LaunchError as error:
        print(f"error: launchenv: {error}", file=sys.stderr)
        return 2
    if argv[:1] == ["--"] and len(argv) > 1:
        os.environ.setdefault(SOURCE_VARIABLE, launch.source)
        os.execvp(argv[1], argv[1:])
    for name, value in launch.variables().items():
        print(f"export {name}={value}")
    print(f"# from {launch.source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
