"""Joining the process group, knowing what each rank is doing, and never hanging."""

import datetime
import os
import socket
import sys
import threading
import time
from pathlib import Path

from . import diagnose

EXIT_FAILED, EXIT_TIMEOUT = 1, 3


class SmokeFailure(RuntimeError):
    """A check that could not go on; the message is already a diagnosis."""


class Session:
    def __init__(self, out, op_timeout, total_timeout):
        self.out = Path(out)
        self.op_timeout = op_timeout
        self.started = time.monotonic()
        self.phase = "starting"
        self.host = socket.gethostname().split(".")[0]
        self.rank, self.world, self.local_rank, self.local_world = 0, 1, 0, 1
        self.launch = None
        self.backend, self.device, self.hosts = None, "cpu", [self.host]
        self.transport_log = None
        self._watchdog = threading.Thread(target=self._expire, args=(total_timeout,), daemon=True)
        self._watchdog.start()

    # --- what each rank is doing ------------------------------------------------------------
    def doing(self, phase):
        self.phase = phase

    @property
    def nodes(self):
        return len(set(self.hosts))

    def say(self, text):
        """Rank 0 speaks for everyone; one write per message so ranks never interleave."""
        if self.rank == 0:
            os.write(1, (text + "\n").encode())

    def diagnosis(self, error_text, *, timed_out=False):
        everything = self.transport_lines()
        cause = diagnose.likely_cause(error_text, everything)
        lines = everything[-5:]
        if timed_out and self.phase.startswith("joining") and self.launch:
            cause = diagnose.joining_timed_out(self.launch.master_addr, self.launch.master_port)
        what = (
            f"timed out after {time.monotonic() - self.started:.0f} s"
            if timed_out
            else f"failed after {time.monotonic() - self.started:.0f} s"
        )
        text = [
            f"smoke: rank {self.rank} of {self.world} on {self.host} {what} while {self.phase}:",
            f"  error: {error_text.strip().splitlines()[0] if error_text.strip() else '(none)'}",
            f"  likely cause: {cause}",
        ]
        if lines:
            text.append("  last transport lines:")
            text += [f"    {line}" for line in lines]
        elif self.backend == "gloo":
            text.append("  transport: gloo over TCP (no NCCL log on CPU)")
        return "\n".join(text)

    def transport_lines(self):
        """This rank's NCCL log so far (none with gloo)."""
        if not self.transport_log or not Path(self.transport_log).is_file():
            return []
        with open(self.transport_log, errors="replace") as log:
            return [line.rstrip() for line in log]

    def _expire(self, seconds):
        time.sleep(seconds)
        os.write(
            2, (self.diagnosis(f"the whole run's timeout of {seconds:g} s passed", timed_out=True) + "\n").encode()
        )
        os._exit(EXIT_TIMEOUT)

    # --- joining -------------------------------------------------------------------------
    def join(self):
        import launchenv
        import torch
        import torch.distributed as dist

        self.doing("reading the launcher's variables")
        self.launch = launchenv.apply()
        self.rank, self.world = self.launch.rank, self.launch.world_size
        self.local_rank, self.local_world = self.launch.local_rank, self.launch.local_world_size
        if torch.cuda.is_available():
            self.backend = "nccl"
            self.device = f"cuda:{self.local_rank % torch.cuda.device_count()}"
            torch.cuda.set_device(self.device)
            self._log_transport()
        else:
            self.backend, self.device = "gloo", "cpu"
        timeout = datetime.timedelta(seconds=self.op_timeout)
        if self.world == 1:
            self.doing("starting a one-rank process group")
            dist.init_process_group(self.backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
        else:
            self.doing(f"checking MASTER_ADDR {self.launch.master_addr}:{self.launch.master_port}")
            # torchrun's agent already listens on MASTER_PORT, so only probe what we will open.
            opens_store = self.rank == 0 and not os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
            problem = diagnose.check_master(self.launch.master_addr, self.launch.master_port, is_master=opens_store)
            if problem:
                raise SmokeFailure(problem)
            self.doing(
                f"joining the {self.backend} process group at "
                f"{self.launch.master_addr}:{self.launch.master_port} ({self.world} ranks)"
            )
            dist.init_process_group(
                self.backend, init_method="env://", rank=self.rank, world_size=self.world, timeout=timeout
            )
        self.doing("exchanging host names")
        hosts = [None] * self.world
        dist.all_gather_object(hosts, self.host)
        self.hosts = hosts

    def _log_transport(self):
        """NCCL_DEBUG=INFO into one file per rank (stdout would slow the run down)."""
        os.environ.setdefault("NCCL_DEBUG", "INFO")
        os.environ.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV")
        if "NCCL_DEBUG_FILE" not in os.environ:
            folder = self.out / "transport"
            folder.mkdir(parents=True, exist_ok=True)
            os.environ["NCCL_DEBUG_FILE"] = str(folder / f"{self.host}.rank{self.rank}.log")
        self.transport_log = os.environ["NCCL_DEBUG_FILE"]

    def leave(self):
        """Wait for rank 0's report, then part. A rank that leaves first with a failing status
        would have srun --kill-on-bad-exit end rank 0 while it still writes."""
        import torch.distributed as dist

        if not dist.is_initialized():
            return
        try:
            self.wait(dist.barrier(async_op=True))
        except Exception:  # a rank already gone: nothing left to wait for
            pass
        dist.destroy_process_group()

    # --- small collective helpers with a per-call timeout --------------------------------------
    def wait(self, work):
        if not work.wait(datetime.timedelta(seconds=self.op_timeout)):
            raise SmokeFailure(f"a collective did not finish within {self.op_timeout:g} s")

    def agree(self, value, op="max"):
        """All ranks' reduction of one float (max/min/sum)."""
        import torch
        import torch.distributed as dist

        ops = {"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN, "sum": dist.ReduceOp.SUM}
        tensor = torch.tensor(
            [float(value)], dtype=torch.float64 if self.backend == "gloo" else torch.float32, device=self.device
        )
        self.wait(dist.all_reduce(tensor, op=ops[op], async_op=True))
        return tensor.item()

    def gather(self, value):
        import torch.distributed as dist

        values = [None] * self.world
        dist.all_gather_object(values, value)
        return values


def fail(session, error):
    """Print this rank's diagnosis and return the exit status."""
    text = str(error) or type(error).__name__
    if not isinstance(error, SmokeFailure):
        text = f"{type(error).__name__}: {text}"
    os.write(2, (session.diagnosis(text) + "\n").encode())
    sys.stderr.flush()
    return EXIT_FAILED
