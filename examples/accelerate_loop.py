"""The causal language model of hf_trainer.py trained by a plain loop that Hugging Face's
Accelerate prepares (`accelerator.prepare(model, optimizer, loader)`, `accelerator.backward`):
rank-0 logging, a checkpoint every --save-every steps and at the end with
`accelerator.save_state` (model, optimizer, each rank's RNG state and the loop's position;
rank 0 writes the model and optimizer), and `--resume` to go on from the last one with
`accelerator.load_state`.

Accelerate sets itself up for several ranks from RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT: torchrun sets them, and under srun the image's launchenv does (the job scripts
of `--launch srun` run `python -m launchenv -- python ...`):

    python -m builder jobscript cpu --site local --nodes 2 --tasks-per-node 2 --launch srun \\
        -- examples/accelerate_loop.py --steps 60 --resume

`--zero-stage 1|2|3` trains under DeepSpeed ZeRO through `accelerate.utils.DeepSpeedPlugin`
(on the CPU image: DeepSpeed's CPU accelerator, over gloo). A checkpoint is written to a
temporary folder and renamed once every rank has written its part, so a job killed while
saving resumes from the one before. Options may also come from `--config FILE` (JSON or YAML;
the command line wins).
"""

import os

# no network at run time: every model and data set here is made in this script
for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY", "TRANSFORMERS_NO_ADVISORY_WARNINGS"):
    os.environ.setdefault(_name, "1")

import re  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    check_language_model_arguments,
    die,
    hosts,
    language_model_parser,
    launched_world,
    leave,
    make_language_model,
    make_sequences,
    parameters_digest,
    parse_with_config,
)

CHECKPOINT = re.compile(r"step-([0-9]+)")


def arguments(argv=None):
    parser = language_model_parser(__doc__, out="checkpoints-accelerate")
    parser.add_argument("--zero-stage", type=int, choices=(1, 2, 3), help="train under DeepSpeed ZeRO at this stage")
    return check_language_model_arguments(parse_with_config(parser, argv))


class Position:
    """Where the loop is: saved with the checkpoint (accelerator.register_for_checkpointing)."""

    def __init__(self):
        self.step = 0

    def state_dict(self):
        return {"step": self.step}

    def load_state_dict(self, state):
        self.step = int(state["step"])


def last_checkpoint(folder):
    """OUT/step-N with the largest N, or None; temporary folders of an unfinished save are not named so."""
    found = [
        (int(match.group(1)), name)
        for name in (os.listdir(folder) if os.path.isdir(folder) else [])
        if (match := CHECKPOINT.fullmatch(name))
    ]
    return os.path.join(folder, max(found)[1]) if found else None


def save(accelerator, folder, step):
    """Every rank writes its part into a temporary folder; rank 0 renames it once all have, then
    removes the older checkpoints but one."""
    final = os.path.join(folder, f"step-{step}")
    partial = os.path.join(folder, f".step-{step}.partial")
    if accelerator.is_main_process:
        shutil.rmtree(partial, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(partial)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(partial, final)
        kept = sorted((int(m.group(1)), name) for name in os.listdir(folder) if (m := CHECKPOINT.fullmatch(name)))
        for _, name in kept[:-2]:
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def main():
    args = arguments()
    launched = launched_world()
    import accelerate
    import torch
    from accelerate.utils import DataLoaderConfiguration, DeepSpeedPlugin, set_seed

    # stage 3: the parameters are gathered from their shards for the digest at the end
    plugin = (
        DeepSpeedPlugin(zero_stage=args.zero_stage, gradient_clipping=1.0, zero3_save_16bit_model=args.zero_stage == 3)
        if args.zero_stage
        else None
    )
    if not torch.cuda.is_available():
        # Accelerate 1.15 joins ranks on CPUs only when told the device is the CPU: without, each
        # rank trains alone; told on the Accelerator (cpu=True, or ACCELERATE_USE_CPU=1), it
        # leaves a DeepSpeed plugin out. Told on its process state first, it does both, as
        # transformers' Trainer sets it up.
        accelerate.PartialState(cpu=True)
    accelerator = accelerate.Accelerator(
        deepspeed_plugin=plugin, dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True)
    )
    if accelerator.num_processes != launched:
        die(f"the launcher started {launched} ranks but Accelerate joined {accelerator.num_processes}")
    if plugin and accelerator.distributed_type != accelerate.DistributedType.DEEPSPEED:
        die(
            f"--zero-stage {args.zero_stage}: Accelerate set up {accelerator.distributed_type.value}, not DeepSpeed"
            + (
                " (ACCELERATE_USE_CPU is set: Accelerate then leaves DeepSpeed out)"
                if os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes")
                else ""
            )
        )
    world = accelerator.num_processes
    log = accelerator.print  # rank 0 only
    set_seed(args.seed)
    model = make_language_model(args.layers, args.heads, args.width, args.vocab, args.length)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    data = torch.utils.data.TensorDataset(make_sequences(args.samples, args.length, args.vocab, args.seed))
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    position = Position()
    accelerator.register_for_checkpointing(position)
    found = last_checkpoint(args.out) if args.resume else None
    if args.resume:
        if found:
            accelerator.load_state(found)
            log(f"resumed from {found}: step {position.step}")
        else:
            log(f"no checkpoint in {args.out}: starting from scratch")
    distributed = world > 1
    engine = f"DeepSpeed ZeRO stage {args.zero_stage}" if args.zero_stage else "DDP" if distributed else "one process"
    log(
        f"accelerate_loop: world {world} on {', '.join(hosts(distributed))}, {accelerator.device.type}, {engine}, "
        f"{len(loader)} steps per epoch, steps {position.step + 1}-{args.steps}"
    )
    losses, total, count, started = [], torch.zeros((), device=accelerator.device), 0, time.perf_counter()
    saved = found
    model.train()
    while position.step < args.steps:
        epoch, skip = divmod(position.step, len(loader))
        loader.set_epoch(epoch)  # the same order as a run that never stopped
        batches = accelerator.skip_first_batches(loader, skip) if skip else loader
        for (tokens,) in batches:
            loss = model(input_ids=tokens, labels=tokens).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            position.step += 1
            total, count = total + loss.detach(), count + 1
            if position.step % args.log_every == 0 or position.step == args.steps:
                mean = accelerator.reduce(total / count, "mean").item()  # over the steps and the ranks
                losses.append(mean)
                log(f"step {position.step}/{args.steps}: loss {mean:.4f}")
                total, count = torch.zeros((), device=accelerator.device), 0
            if position.step % args.save_every == 0 or position.step == args.steps:
                saved = save(accelerator, args.out, position.step)
            if position.step >= args.steps:
                break
    if losses:
        log(f"first loss {losses[0]:.4f}")
        log(f"last loss {losses[-1]:.4f}")
    log(f"trained to step {position.step} in {time.perf_counter() - started:.1f} s; checkpoint -> {saved}")
    state = accelerator.get_state_dict(model)  # gathered from the shards under ZeRO stage 3
    log(f"final parameters sha256 {parameters_digest(state) if state is not None else ''}")
    accelerator.wait_for_everyone()
    accelerator.end_training()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    leave(main())
