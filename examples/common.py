"""What both examples share: a small data set made on the spot, the CNN, rank-0 logging, the
Slurm signal that asks for a checkpoint, and atomic file writes.

The data set: 8x8 grey images of 10 classes, each class a fixed random pattern plus noise,
the same on every rank for the same seed (nothing is downloaded; scikit-learn's digits are
8x8 too, so a real data set drops in as a TensorDataset of the same shape).
"""

import hashlib
import os
import signal
import socket
import sys

import torch
from torch import nn


def make_dataset(samples, seed):
    """A TensorDataset of `samples` (image, label) pairs, identical for the same seed."""
    generator = torch.Generator().manual_seed(seed)
    patterns = torch.rand(10, 1, 8, 8, generator=generator)
    labels = torch.randint(0, 10, (samples,), generator=generator)
    images = patterns[labels] + 0.35 * torch.randn(samples, 1, 8, 8, generator=generator)
    return torch.utils.data.TensorDataset(images, labels)


def make_model():
    """Two convolutions and a linear layer: about 6k parameters, fast on a CPU."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),      # 16 x 4 x 4
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),     # 32 x 2 x 2
        nn.Flatten(), nn.Linear(128, 10))


def parameters_digest(model):
    """sha256 over every parameter's bytes, in order: equal digests, equal parameters bit for bit."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def hosts(distributed):
    """The sorted host names of all ranks: proof that the job spans the nodes it asked for."""
    names = [socket.gethostname()]
    if distributed:
        names = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(names, socket.gethostname())
    return sorted(set(names))


def log(rank, text):
    """Rank 0 speaks for the job; the other ranks stay quiet."""
    if rank == 0:
        print(text, flush=True)


class CheckpointSignal:
    """Slurm's `--signal=USR1@SECONDS` (or `scancel --signal=USR1 JOB`) sets a flag; the
    training loop checks it between steps, all ranks together, then checkpoints and stops."""

    def __init__(self, signum=signal.SIGUSR1):
        self.signum, self.received = signum, False
        signal.signal(signum, self._set)

    def _set(self, signum, frame):
        self.received = True

    def agreed(self, distributed):
        """True on every rank once any rank got the signal (ranks get it at slightly
        different moments; they must stop at the same step)."""
        flag = torch.tensor([1 if self.received else 0])
        if distributed:
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        return bool(flag.item())


def save_atomically(state, path):
    """torch.save to a temporary file beside `path`, then rename: a job killed while saving
    leaves the previous checkpoint whole."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def die(text):
    print(f"error: {text}", file=sys.stderr, flush=True)
    sys.exit(2)


def leave(status):
    """End the process once the work is saved and reported, without Python's shutdown: a C++
    thread of torch's still running then can abort the process ("terminate called without an
    active exception"), and the job counts a rank that trained to the end as failed (seen
    once on the two-node test cluster, on a loaded machine)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
