"""A small causal language model trained with Hugging Face's Trainer: a GPT-2 of two layers
initialised at random from a config object (nothing downloaded), on token sequences generated
here and held in a `datasets.Dataset`, rank-0 logging, a checkpoint every --save-every steps
(model, optimizer, scheduler and each rank's RNG state, written by the Trainer: rank 0 writes
the model and optimizer), and `--resume` to go on from the last one.

The Trainer sets itself up for several ranks from RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT: torchrun sets them, and under srun the image's launchenv does (the job scripts of
`--launch srun` run `python -m launchenv -- python ...`):

    python -m builder jobscript cpu --site local --nodes 2 --tasks-per-node 2 --launch srun \\
        -- examples/hf_trainer.py --steps 60 --resume
    python -m builder jobscript cpu --site local --nodes 2 --tasks-per-node 2 --launch torchrun \\
        -- examples/hf_trainer.py --steps 60 --resume

`--deepspeed examples/ds_config_hf.json` trains under DeepSpeed ZeRO (the Trainer fills the
config's "auto" values from its own arguments); on the CPU image it uses DeepSpeed's CPU
accelerator and the optimizer ops the image prebuilt. Options may also come from
`--config FILE` (JSON or YAML; the command line wins).
"""

import os

# no network at run time: every model and data set here is made in this script
for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY", "TRANSFORMERS_NO_ADVISORY_WARNINGS"):
    os.environ.setdefault(_name, "1")

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


def arguments(argv=None):
    parser = language_model_parser(__doc__, out="checkpoints-hf")
    parser.add_argument("--deepspeed", metavar="CONFIG", help="DeepSpeed JSON config (e.g. examples/ds_config_hf.json)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds a collective may wait for a rank")
    args = check_language_model_arguments(parse_with_config(parser, argv))
    if args.deepspeed and not os.path.isfile(args.deepspeed):
        die(f"--deepspeed {args.deepspeed}: no such file; expected a DeepSpeed JSON config")
    return args


def main():
    args = arguments()
    launched = launched_world()
    import datasets
    import torch
    import transformers
    from transformers.trainer_utils import get_last_checkpoint

    transformers.logging.set_verbosity_warning()
    transformers.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    sequences = make_sequences(args.samples, args.length, args.vocab, args.seed).tolist()
    data = datasets.Dataset.from_dict({"input_ids": sequences, "labels": sequences})
    training = transformers.TrainingArguments(
        output_dir=args.out,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch_size,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        logging_strategy="steps",
        logging_steps=args.log_every,
        save_strategy="steps",
        save_steps=args.save_every,
        save_total_limit=2,
        report_to=[],
        disable_tqdm=True,
        seed=args.seed,
        data_seed=args.seed,
        # on CPUs, say so: otherwise each rank trains alone (Accelerate joins CPU ranks only when told)
        use_cpu=not torch.cuda.is_available(),
        ddp_timeout=args.timeout,
        deepspeed=args.deepspeed,
        dataloader_drop_last=True,
        ddp_find_unused_parameters=False,
    )
    rank, world = training.process_index, training.world_size
    if world != launched:
        die(f"the launcher started {launched} ranks but the Trainer joined {world}")
    torch.manual_seed(args.seed)
    model = make_language_model(args.layers, args.heads, args.width, args.vocab, args.length)
    losses = []
    log = (lambda text: print(text, flush=True)) if rank == 0 else (lambda text: None)

    class Losses(transformers.TrainerCallback):
        """One line per --log-every steps on rank 0 (the loss averaged over those steps and
        over the ranks, as the Trainer logs it)."""

        def on_log(self, args_, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs and "loss" in logs:
                losses.append(logs["loss"])
                log(f"step {state.global_step}/{state.max_steps}: loss {logs['loss']:.4f}")

    trainer = transformers.Trainer(
        model=model,
        args=training,
        train_dataset=data,
        data_collator=transformers.default_data_collator,
        callbacks=[Losses()],
    )
    trainer.remove_callback(transformers.PrinterCallback)  # its dict lines: ours say the same
    start_from = None
    if args.resume:
        start_from = get_last_checkpoint(args.out) if os.path.isdir(args.out) else None
        log(f"resumed from {start_from}" if start_from else f"no checkpoint in {args.out}: starting from scratch")
    plugin = trainer.accelerator.state.deepspeed_plugin
    if training.deepspeed and plugin is None:
        die(
            "--deepspeed: Accelerate set up the Trainer without DeepSpeed"
            + (
                " (ACCELERATE_USE_CPU is set: Accelerate then leaves DeepSpeed out)"
                if os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes")
                else ""
            )
        )
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    engine = f"DeepSpeed ZeRO stage {plugin.zero_stage}" if plugin else "DDP" if world > 1 else "one process"
    log(
        f"hf_trainer: world {world} on {', '.join(hosts(distributed))}, {training.device.type}, {engine}, "
        f"{sum(p.numel() for p in model.parameters())} parameters, steps to {args.steps}"
    )
    started = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=start_from)
    if losses:
        log(f"first loss {losses[0]:.4f}")
        log(f"last loss {losses[-1]:.4f}")
    optimizer = getattr(trainer.model_wrapped, "basic_optimizer", None) or getattr(
        trainer.optimizer, "optimizer", trainer.optimizer
    )  # DeepSpeed's, else torch's
    log(
        f"trained to step {result.global_step} in {time.perf_counter() - started:.1f} s with "
        f"{type(optimizer).__name__}; checkpoint -> {get_last_checkpoint(args.out)}"
    )
    log(f"final parameters sha256 {parameters_digest(trainer.model)}")
    if distributed:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    leave(main())
