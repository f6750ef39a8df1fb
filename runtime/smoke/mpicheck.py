"""mpi4py across the launcher's ranks. It runs in a child process: an MPI library that
cannot start (srun without the right --mpi plugin) may abort the whole process, and must not
take the smoke run with it.

    python -m smoke.mpicheck EXPECTED_SIZE      # prints 'size sum'
"""

import sys

from . import commands
from .verdict import Verdict

MPI_LAUNCHERS = ("openmpi", "pmix", "pmi")


def check(session, slurm_mpi, timeout):
    source = session.launch.source
    if source == "slurm" and slurm_mpi in (None, "none"):
        return Verdict.none(
            "srun without an MPI plugin (the site's slurm_mpi is none); launch with mpirun to check mpi4py"
        )
    if source not in MPI_LAUNCHERS + ("slurm",):
        return Verdict.none(f"launched by {source}, not by MPI or srun")
    result = commands.run([sys.executable, "-m", "smoke.mpicheck", str(session.world)], timeout)
    if result.timed_out:
        return Verdict.failed(f"MPI all-reduce {result.late}")
    expected = session.world * (session.world + 1) // 2
    fields = result.stdout.split()
    if result.returncode != 0 or len(fields) != 2:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        hint = f" (under srun use --mpi={slurm_mpi})" if source == "slurm" else ""
        return Verdict.failed(f"mpi4py failed, exit {result.returncode}: {last}{hint}")
    size, total = map(int, fields)
    if size != session.world:
        return Verdict.failed(
            f"MPI sees {size} ranks where the launcher started {session.world}: each rank started MPI on its own"
        )
    return Verdict.judged(total == expected, f"MPI all-reduce over {size} ranks gave {total}, expected {expected}")


def main():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    total = comm.allreduce(comm.Get_rank() + 1)
    print(comm.Get_size(), total)


if __name__ == "__main__":
    main()
