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
`scontrol` is not inside the container; with every rank on one node, 127.0.0.1.
MASTER_PORT, when not set already: HPCML_MASTER_PORT_BASE (default 10000) plus a number from
the job id and the step id (10 x job id modulo 2000, plus the step id, or Open MPI's job id,
modulo 10; the steps named batch, extern and interactive count as 0), so neither two jobs
sharing a node nor two steps of one allocation running at once collide; with no job id, 29500.

Bad input stops `python -m launchenv` (and `-- CMD`, before CMD starts) with one line on stderr,
`error: launchenv: ...`, and exit status 2: a variable it reads that is not as a launcher sets
it (it names the variable, its value and what was expected: a rank that is not a whole number
or not below the world size, a node list it cannot read, a port out of range), or, on more
than one node, a MASTER_ADDR that does not resolve on this node. detect() and apply() raise
LaunchError for the same. A CMD that cannot be started: one line, exit status 127 (not found)
or 126, as env(1) does.
Standard library only (and hpcml_contract and launchenv_ranks, installed beside it): it
runs in any image. launchenv_ranks reads the launchers' rank variables; this module adds
the master's address and port, and the command line.
"""

import itertools
import os
import re
import socket
import sys
from dataclasses import dataclass

import hpcml_contract as contract
from launchenv_ranks import LaunchError, check_ranks, integer, ranks


def one_line(text) -> str:
    """``text`` with each character that would not print as itself escaped (a newline as \\n),
    as the builder's errors.one_line does (the runtime carries no builder); the smoke suite's
    report uses it too."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in str(text))


VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


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
        return {
            "RANK": str(self.rank),
            "LOCAL_RANK": str(self.local_rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_WORLD_SIZE": str(self.local_world_size),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }


MAX_HOSTS = 1_000_000  # more than any machine has: garbage, not a node list
STEP_NAMES = ("batch", "extern", "interactive")  # Slurm's steps without a number


def expand_hostlist(expression):
    """Slurm hostlist syntax: 'nid[005-007,012],gpu-x1' -> nid005 nid006 nid007 nid012 gpu-x1."""
    hosts = []
    for item in _split_top_level(expression.strip()):
        hosts += _expand_item(item, MAX_HOSTS - len(hosts))
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
        if depth > 1:
            raise LaunchError(f"bad hostlist {text!r}: '[' inside '[...]'")
        current += char
    if depth:
        raise LaunchError(f"bad hostlist {text!r}: '[' without ']'")
    return [item for item in items + [current] if item]


def _expand_item(item, room):
    """The hosts of one item, at most ``room``; the last bracket group varies fastest."""
    pieces = re.split(r"\[([^\]]*)\]", item)  # text, group, text, group, ..., text
    choices, count = [], 1
    for index, piece in enumerate(pieces):
        numbers = _numbers(piece, item, room // count) if index % 2 else [piece]
        count *= len(numbers)
        choices.append(numbers)
    if count > room:
        raise LaunchError(f"hostlist names more than {MAX_HOSTS} hosts (at {item!r})")
    return ["".join(parts) for parts in itertools.product(*choices)]


def _numbers(group, item, limit):
    """The numbers of one bracket group such as '005-007,012', at most ``limit`` of them."""
    numbers = []
    for part in group.split(","):
        bounds = part.split("-")
        if (
            not all(re.fullmatch(r"[0-9]+", bound) for bound in bounds)
            or len(bounds) > 2
            or int(bounds[0]) > int(bounds[-1])
        ):
            raise LaunchError(f"bad hostlist range {part!r} in {item!r}; expected N or LOW-HIGH")
        low, high = int(bounds[0]), int(bounds[-1])
        if high - low + 1 + len(numbers) > limit:  # counted before it is spelt out
            raise LaunchError(f"hostlist names more than {MAX_HOSTS} hosts (at {item!r})")
        numbers += [str(n).zfill(len(bounds[0])) for n in range(low, high + 1)]
    return numbers


def _first_host(env, name):
    try:
        hosts = expand_hostlist(env[name])
    except LaunchError as error:
        raise LaunchError(f"{name}: {error}") from None
    if not hosts:
        raise LaunchError(f"{name}={env[name]!r} names no host; expected a Slurm node list")
    return hosts[0]


def _port(env, one_step):
    """MASTER_PORT when set, else one from the job (and step) id: see the module's docstring."""
    port = env.get("MASTER_PORT")
    if port:
        if not re.fullmatch(r"[0-9]{1,5}", port) or not 0 < int(port) < 65536:
            raise LaunchError(f"MASTER_PORT={port!r} is not a port number; expected 1 to 65535")
        return int(port)
    base = integer(env, contract.MASTER_PORT_BASE, 10000)
    job_var = next((v for v in ("SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid") if env.get(v)), None)
    if job_var is None:
        return 29500  # torch's own default: one job on the node
    job = integer(env, job_var)
    if job < 0:
        raise LaunchError(f"{job_var}={job} is not a job id; expected 0 or more")
    if one_step:
        step_id = env.get("SLURM_STEP_ID", "0")
        if step_id in STEP_NAMES:
            step = 0
        elif re.fullmatch(r"[0-9]+", step_id):
            step = int(step_id) % 10
        else:
            raise LaunchError(
                f"SLURM_STEP_ID={step_id!r} is not a step id; expected a whole number or one of {', '.join(STEP_NAMES)}"
            )
    else:
        step = integer(env, "OMPI_MCA_ess_base_jobid", 0) % 10
    port = base + job % 2000 * 10 + step
    if not 0 < port < 65536:
        raise LaunchError(
            f"{contract.MASTER_PORT_BASE}={base} gives port {port} for {job_var}={job}, "
            "not a port number; expected a base from 1 to 45536"
        )
    return port


def detect(env=None):
    """The Launch this process is part of, from ``env`` (default: os.environ). Any variable it
    reads that is not as a launcher sets it raises LaunchError, which names it."""
    env = dict(os.environ if env is None else env)
    source, rank, local_rank, world, local_world = ranks(env)
    check_ranks(source, rank, local_rank, world, local_world)
    # Open MPI's mpirun starts its ranks on the first node itself (in the batch step) and on
    # the others through `srun` steps of one node each: there, only the job's node list and
    # id are the same on every node. The other launchers' ranks are tasks of one step.
    one_step = source != "openmpi"
    master = env.get("MASTER_ADDR")
    if not master:
        nodelist = next(
            (
                name
                for name in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST")
                if env.get(name) and (one_step or name == "SLURM_JOB_NODELIST")
            ),
            None,
        )
        if nodelist:
            master = _first_host(env, nodelist)
        elif local_world[0] == world[0]:
            master = "127.0.0.1"
        else:
            raise LaunchError(
                f"{source}: ranks span several nodes and no MASTER_ADDR or Slurm "
                "node list is set; export MASTER_ADDR=<first node>"
            )
    return Launch(source, rank[0], local_rank[0], world[0], local_world[0], master, _port(env, one_step))


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
        return  # one node: the master is this machine
    try:
        socket.getaddrinfo(launch.master_addr, launch.master_port, type=socket.SOCK_STREAM)
    except UnicodeError:  # 'a..b', a label over 63 characters
        raise LaunchError(
            f"MASTER_ADDR={launch.master_addr!r} is not a host name; expected a name or an address"
        ) from None
    except socket.gaierror as error:
        raise LaunchError(
            f"rank {launch.rank} on {socket.gethostname()}: MASTER_ADDR "
            f"{launch.master_addr!r} does not resolve here ({error.strerror}); every "
            "node must resolve it (DNS or /etc/hosts), or set MASTER_ADDR to an address"
        ) from None


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] not in ([], ["--"]):
            raise LaunchError(f"unexpected argument {argv[0]!r}; usage: python -m launchenv [-- CMD ARGS...]")
        launch = apply()
        check_master_resolves(launch)
    except LaunchError as error:
        # one line, whatever the values held: the job's log shows it beside every rank's
        print("error: launchenv: " + one_line(" ".join(str(error).splitlines())), file=sys.stderr)
        return 2
    if len(argv) > 1:
        os.environ.setdefault(contract.LAUNCHED_BY, launch.source)
        try:
            os.execvp(argv[1], argv[1:])
        except OSError as error:  # as env(1): 127 not found, 126 not runnable
            print(f"error: launchenv: cannot run {argv[1]!r}: {error.strerror}", file=sys.stderr)
            return 127 if isinstance(error, FileNotFoundError) else 126
    for name, value in launch.variables().items():
        print(f"export {name}={value}")
    print(f"# from {launch.source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
