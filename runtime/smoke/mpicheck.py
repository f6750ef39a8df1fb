"""mpi4py across the launcher's ranks. It runs in a child process: an MPI library that
cannot start (srun without the right --mpi plugin) may abort the whole process, and must not
take the smoke run with it.

    python -m smoke.mpicheck EXPECTED_SIZE      # prints 'size sum'

Where the environment sets MPICH control variables (MPIR_CVAR_*, as the LUMI images set MPICH's
GPU support), a second line says how the MPI library holds them, read back through MPI_T
(smoke.mpicvars): 'settings NAME=VALUE ...', then 'wrong ...' for any it did not take. The
verdict carries them, so the report shows the settings in force on the job's nodes.
"""

import os
import sys

from . import commands, mpicvars
from .verdict import Verdict

MPI_LAUNCHERS = ("openmpi", "pmix", "pmi")
# the child's lines after 'size sum', where the environment sets MPICH control variables
IN_FORCE, WRONG = "settings ", "wrong settings: "
SETTINGS = (IN_FORCE, WRONG)


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
    lines = result.stdout.splitlines()
    fields = lines[0].split() if lines else []
    if result.returncode != 0 or len(fields) != 2:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        hint = f" (under srun use --mpi={slurm_mpi})" if source == "slurm" else ""
        return Verdict.failed(f"mpi4py failed, exit {result.returncode}: {last}{hint}")
    size, total = map(int, fields)
    if size != session.world:
        return Verdict.failed(
            f"MPI sees {size} ranks where the launcher started {session.world}: each rank started MPI on its own"
        )
    said = f"MPI all-reduce over {size} ranks gave {total}, expected {expected}"
    settings = [line.strip() for line in lines[1:] if line.startswith(SETTINGS)]
    wrong = [line.removeprefix(WRONG) for line in settings if line.startswith(WRONG)]
    if total == expected and wrong:
        return Verdict.failed(f"{said}, but MPI did not take the environment's settings: {wrong[0]}")
    in_force = [line.removeprefix(IN_FORCE) for line in settings if line.startswith(IN_FORCE)]
    return Verdict.judged(total == expected, said + (f"; MPI holds {in_force[0]}" if in_force else ""))


def main():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    total = comm.allreduce(comm.Get_rank() + 1)
    print(comm.Get_size(), total)
    asked = mpicvars.asked_by(os.environ)
    if asked:  # on every rank: each node's MPI reads its own environment
        found = mpicvars.read(mpicvars.library_of(MPI), asked)
        print(IN_FORCE + " ".join(mpicvars.shown(found)))
        wrong = mpicvars.differences(asked, found)
        if wrong:
            print(WRONG + "; ".join(wrong))


if __name__ == "__main__":
    main()
