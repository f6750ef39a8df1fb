"""Smoke tests for an image on a machine: all-reduce correctness and bandwidth against the
site's threshold, the transport NCCL/RCCL really used, DeepSpeed's prebuilt ops, mpi4py, and a
short DDP run with a checkpoint; reported as a table, JSON and a plot. Never hangs: every
collective and the whole run have timeouts, and a failure names the rank, what it was doing
and the likely cause.

    python -m smoke all                       # one process, or under srun / mpirun / torchrun
    torchrun --nproc-per-node=8 -m smoke allreduce --sizes 8:256M
"""

__version__ = "1"
