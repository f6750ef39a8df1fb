"""Data-parallel training as users write it: a small CNN, DistributedSampler, DDP, rank-0
logging, a checkpoint after every epoch, `--resume` to go on from the last one, and Slurm's
`--signal=USR1@SECONDS` to checkpoint mid-epoch before the time limit.

Runs under every launch mode the job scripts offer (torchrun, or one task per rank with the
image's launchenv setting RANK, WORLD_SIZE and MASTER_ADDR), and alone without any:

    python -m builder jobscript cpu --site local --nodes 2 --tasks-per-node 2 --launch srun \
        -- examples/ddp_cnn.py --epochs 6 --resume

A job killed part way and submitted again with `--resume` ends with the same parameters, bit
for bit on CPU, as a job that was never interrupted (same ranks; the data order depends only
on the seed, the epoch and the number of ranks).
"""

import argparse
import datetime
import itertools
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    CheckpointSignal,
    die,
    hosts,
    leave,
    log,
    make_dataset,
    make_model,
    parameters_digest,
    save_atomically,
    training_device,
)


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--samples", type=int, default=8192, help="size of the generated data set")
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    parser.add_argument("--resume", action="store_true", help="go on from CHECKPOINT_DIR/last.pt if it exists")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a collective may wait for a rank")
    parser.add_argument(
        "--step-pause",
        type=float,
        default=0.0,
        help="seconds to sleep after each step: a stand-in for a heavier model, to try "
        "Slurm's --signal on a machine where this small one trains in seconds",
    )
    args = parser.parse_args()
    if args.epochs < 1 or args.samples < 1 or args.batch_size < 1:
        die("--epochs, --samples and --batch-size must be positive")
    return args


def join(timeout):
    """(rank, world, local rank, device, distributed) from the launcher's variables."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    device = training_device()
    if world > 1:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(
            "nccl" if device.type == "cuda" else "gloo",
            init_method="env://",
            timeout=datetime.timedelta(seconds=timeout),
        )
    return rank, world, local_rank, device, world > 1


def load(path, model, optimizer, world, rank):
    """(epoch, step) to start from: the checkpoint's, or (0, 0) without one."""
    if not os.path.exists(path):
        log(rank, f"no checkpoint at {path}: starting from scratch")
        return 0, 0
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    epoch, step = state["epoch"], state["step"]
    if step and state["world_size"] != world:
        # another number of ranks splits the epoch differently: redo the epoch from its start
        log(rank, f"checkpoint taken with {state['world_size']} ranks, now {world}: epoch {epoch + 1} starts over")
        step = 0
    log(rank, f"resumed from {path}: epoch {epoch + 1}, step {step}")
    return epoch, step


def settle_buckets(ddp, images):
    """DDP groups gradients in buckets by parameter order, and regroups them by the order the
    gradients came in after the first backward pass. A sum of more than two ranks' floats
    depends on where each value sits, so a resumed job would reduce its first step in another
    grouping than the job it continues. One pass with a zero loss (gradients all zero, no
    optimizer step) regroups before any real step, fresh or resumed: bit for bit equal."""
    (ddp(images).sum() * 0).backward()
    ddp.zero_grad(set_to_none=True)


def main():
    args = arguments()
    rank, world, _, device, distributed = join(args.timeout)
    try:
        return train(args, rank, world, device, distributed)
    finally:
        if distributed:
            dist.destroy_process_group()


def train(args, rank, world, device, distributed):
    torch.manual_seed(args.seed)
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    path = os.path.join(args.checkpoint_dir, "last.pt")
    epoch, step = load(path, model, optimizer, world, rank) if args.resume else (0, 0)
    ddp = torch.nn.parallel.DistributedDataParallel(model) if distributed else model
    dataset = make_dataset(args.samples, args.seed)
    sampler = torch.utils.data.DistributedSampler(
        dataset, num_replicas=world, rank=rank, shuffle=True, seed=args.seed, drop_last=True
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    stop = CheckpointSignal()
    if distributed:
        settle_buckets(ddp, dataset[:2][0].to(device))
    log(
        rank,
        f"ddp_cnn: {world} rank(s) on {', '.join(hosts(distributed))}, {device.type}, "
        f"{len(loader)} steps per epoch, epochs {epoch + 1}-{args.epochs}",
    )

    def checkpoint(epoch, step):
        if rank == 0:
            save_atomically(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "epoch": epoch,
                    "step": step,
                    "world_size": world,
                },
                path,
            )
        if distributed:
            dist.barrier()

    while epoch < args.epochs:
        sampler.set_epoch(epoch)
        # loss sum, right, seen: on the training device, where the backend reduces them
        started, totals = time.perf_counter(), torch.zeros(3, dtype=torch.float64, device=device)
        done = step  # batches of this epoch already trained
        for step, (images, labels) in enumerate(itertools.islice(loader, done, None), start=done):
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            output = ddp(images)
            loss = torch.nn.functional.cross_entropy(output, labels)
            loss.backward()
            optimizer.step()
            time.sleep(args.step_pause)
            totals += torch.tensor(
                [loss.item() * len(labels), (output.argmax(1) == labels).sum().item(), len(labels)],
                dtype=torch.float64,
                device=device,
            )
            if stop.agreed(distributed, device):
                checkpoint(epoch, step + 1)
                log(
                    rank,
                    f"checkpoint on SIGUSR1 at epoch {epoch + 1} step {step + 1} -> {path}; "
                    "submit again with --resume to go on",
                )
                return 0
        if distributed:
            dist.all_reduce(totals)
        epoch, step = epoch + 1, 0
        checkpoint(epoch, 0)
        log(
            rank,
            f"epoch {epoch}/{args.epochs}: loss {totals[0] / max(totals[2], 1):.4f}, "
            f"accuracy {totals[1] / max(totals[2], 1):.3f}, {time.perf_counter() - started:.1f} s; "
            f"checkpoint -> {path}",
        )
    log(rank, f"final parameters sha256 {parameters_digest(model)}")
    return 0


if __name__ == "__main__":
    leave(main())
