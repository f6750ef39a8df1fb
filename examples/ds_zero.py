"""The same CNN trained with DeepSpeed: ZeRO stage 2 and the optimizer from ds_config.json
(beside this script unless --deepspeed_config names another), checkpoints with DeepSpeed's
own save_checkpoint (every rank writes its optimizer shard), `--resume` from the latest one,
and Slurm's `--signal=USR1@SECONDS` for a checkpoint mid-epoch.

On one node the job script starts it with DeepSpeed's launcher; across nodes with one Slurm
task per rank, the image's launchenv giving the ranks (never the launcher's ssh):

    python -m builder jobscript cpu --site local --nodes 2 --tasks-per-node 2 --launch deepspeed \
        -- examples/ds_zero.py --epochs 4 --resume

On GPU sites, the optimizer runs on the op the image prebuilt (FusedAdam); nothing compiles
at run time. Add "bf16": {"enabled": true} to the config there.
"""

import argparse
import os
import shutil
import sys
import time

import deepspeed
import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import CheckpointSignal, die, hosts, leave, log, make_dataset, make_model, parameters_digest  # noqa: E402


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--samples", type=int, default=8192, help="size of the generated data set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-dir", default="checkpoints-ds")
    parser.add_argument("--resume", action="store_true", help="go on from the latest checkpoint if there is one")
    # DeepSpeed's launcher passes --local_rank to each process it starts
    parser.add_argument("--local_rank", "--local-rank", type=int, default=int(os.environ.get("LOCAL_RANK", "0")))
    deepspeed.add_config_arguments(parser)
    args = parser.parse_args()
    args.deepspeed_config = args.deepspeed_config or os.path.join(HERE, "ds_config.json")
    if not os.path.isfile(args.deepspeed_config):
        die(f"--deepspeed_config {args.deepspeed_config}: no such file; expected a DeepSpeed JSON config")
    if args.epochs < 1 or args.samples < 1:
        die("--epochs and --samples must be positive")
    return args


def save(engine, folder, epoch, step):
    """DeepSpeed writes `latest` last, so a job killed while saving resumes from the one
    before; older tags are removed only once the new one is complete."""
    tag = f"epoch{epoch}-step{step}"
    engine.save_checkpoint(folder, tag=tag, client_state={"epoch": epoch, "step": step})
    if engine.global_rank == 0:
        for old in os.listdir(folder):
            if old.startswith("epoch") and old != tag:
                shutil.rmtree(os.path.join(folder, old), ignore_errors=True)
    dist.barrier()
    return tag


def main():
    args = arguments()
    cuda = torch.cuda.is_available()
    deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo")
    torch.manual_seed(args.seed)
    engine, _, _, _ = deepspeed.initialize(args=args, model=make_model(), model_parameters=None)
    rank, world = engine.global_rank, engine.world_size
    epoch, step = 0, 0
    if args.resume:
        path, state = engine.load_checkpoint(args.checkpoint_dir)
        if path is None:
            log(rank, f"no checkpoint in {args.checkpoint_dir}: starting from scratch")
        else:
            epoch, step = state["epoch"], state["step"]
            log(rank, f"resumed from {path}: epoch {epoch + 1}, step {step}")
    dataset = make_dataset(args.samples, args.seed)
    sampler = torch.utils.data.DistributedSampler(
        dataset, num_replicas=world, rank=rank, shuffle=True, seed=args.seed, drop_last=True
    )
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=engine.train_micro_batch_size_per_gpu(), sampler=sampler, drop_last=True
    )
    stop = CheckpointSignal()
    log(
        rank,
        f"ds_zero: {world} rank(s) on {', '.join(hosts(True))}, ZeRO stage {engine.zero_optimization_stage()}, "
        f"{type(engine.optimizer).__name__}, {len(loader)} steps per epoch, epochs {epoch + 1}-{args.epochs}",
    )
    while epoch < args.epochs:
        sampler.set_epoch(epoch)
        # loss sum, samples: on the engine's device, where the backend reduces them
        started, totals = time.perf_counter(), torch.zeros(2, dtype=torch.float64, device=engine.device)
        for index, (images, labels) in enumerate(loader):
            if index < step:  # resumed mid-epoch: these were trained already
                continue
            loss = torch.nn.functional.cross_entropy(engine(images.to(engine.device)), labels.to(engine.device))
            engine.backward(loss)
            engine.step()
            totals += torch.tensor([loss.item() * len(labels), len(labels)], dtype=torch.float64, device=engine.device)
            if stop.agreed(True, engine.device):
                tag = save(engine, args.checkpoint_dir, epoch, index + 1)
                log(
                    rank,
                    f"checkpoint on SIGUSR1 at epoch {epoch + 1} step {index + 1} -> "
                    f"{args.checkpoint_dir}/{tag}; submit again with --resume to go on",
                )
                return 0
        dist.all_reduce(totals)
        epoch, step = epoch + 1, 0
        tag = save(engine, args.checkpoint_dir, epoch, 0)
        log(
            rank,
            f"epoch {epoch}/{args.epochs}: loss {totals[0] / max(totals[1], 1):.4f}, "
            f"{time.perf_counter() - started:.1f} s; checkpoint -> {args.checkpoint_dir}/{tag}",
        )
    log(rank, f"final parameters sha256 {parameters_digest(engine.module)}")
    return 0


if __name__ == "__main__":
    leave(main())
