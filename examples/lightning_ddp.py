"""The CNN of ddp_cnn.py as a LightningModule, trained by `lightning.Trainer(strategy="ddp")`:
rank-0 logging, a checkpoint after every epoch written by rank 0 (Lightning's ModelCheckpoint,
CHECKPOINT_DIR/last.ckpt), and `--resume` to go on from it (`fit(ckpt_path="last")`).

Lightning takes the ranks from the launcher; this script names the launcher's cluster
environment to it (`plugins=`) and tells it the layout, as Lightning's docs for clusters ask:

- under srun, one task per rank (`--launch srun`): SLURMEnvironment, which reads SLURM_PROCID,
  SLURM_LOCALID, SLURM_NODEID and SLURM_NTASKS and requires `devices` to equal the job's
  `--ntasks-per-node` (SLURM_NTASKS_PER_NODE must be set: ask with --ntasks-per-node, not
  --ntasks) and `num_nodes` its `--nodes`; both are taken from Slurm here. Named, it also
  serves jobs called `bash` or `interactive` (salloc's), which Lightning's own detection
  leaves alone. MASTER_ADDR and MASTER_PORT come from the image's launchenv, which the job
  scripts put in front (`python -m launchenv -- python ...`);
- under torchrun (`--launch torchrun`): TorchElasticEnvironment, devices = LOCAL_WORLD_SIZE
  and num_nodes = WORLD_SIZE / LOCAL_WORLD_SIZE;
- alone (`python examples/lightning_ddp.py --devices 2`): Lightning starts the ranks itself.

    python -m builder jobscript cpu --site local --nodes 2 --tasks-per-node 2 --launch srun \\
        -- examples/lightning_ddp.py --epochs 6 --resume

Lightning's automatic requeue on Slurm's `--signal=USR1@SECONDS` is off here (see layout()):
a job stopped by the signal, scancel or its time limit goes on from the last epoch's checkpoint
when submitted again with --resume. Options may also come from `--config FILE` (JSON or YAML;
the command line wins).
"""

import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import die, hosts, leave, make_dataset, make_model, parameters_digest, parse_with_config  # noqa: E402


def arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=6, help="epochs in all (a resumed run goes on to this)")
    parser.add_argument("--samples", type=int, default=4096, help="size of the generated data set")
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--accelerator", default="auto", help="cpu, gpu or auto")
    parser.add_argument("--devices", type=int, help="ranks per node (default: from srun or torchrun, else 1)")
    parser.add_argument("--num-nodes", type=int, help="nodes (default: from srun or torchrun, else 1)")
    parser.add_argument("--checkpoint-dir", default="checkpoints-lightning")
    parser.add_argument("--resume", action="store_true", help="go on from CHECKPOINT_DIR/last.ckpt if it exists")
    args = parse_with_config(parser, argv)
    for name in ("epochs", "samples", "batch_size", "devices", "num_nodes"):
        value = getattr(args, name)
        if value is not None and value < 1:
            die(f"--{name.replace('_', '-')} must be positive")
    return args


def layout(args):
    """(cluster environment, devices, num_nodes): the environment Lightning is to use, named
    rather than left to its detection, and the layout to tell it, which Lightning's own check
    against the launcher's must find equal."""
    from lightning.pytorch.plugins.environments import LightningEnvironment, SLURMEnvironment, TorchElasticEnvironment

    if TorchElasticEnvironment.detect():  # Lightning ranks torchrun first too
        per_node = int(os.environ["LOCAL_WORLD_SIZE"])
        environment = TorchElasticEnvironment()
        found = per_node, int(os.environ["WORLD_SIZE"]) // per_node, "torchrun"
    elif SLURMEnvironment.detect() or int(os.environ.get("SLURM_STEP_NUM_TASKS") or 1) > 1:
        # srun started the ranks. Lightning's detection skips jobs named bash or interactive (what
        # salloc names its job), where it would start ranks itself: named here, Slurm's ranks count.
        if "SLURM_NTASKS_PER_NODE" not in os.environ:
            die(
                "srun started this without SLURM_NTASKS_PER_NODE: Lightning needs the job's tasks per node; "
                "ask for them with --ntasks-per-node (sbatch, salloc or srun), not --ntasks"
            )
        # auto_requeue=False: Lightning's answer to Slurm's --signal=USR1 (a checkpoint taken in
        # the signal handler, then `scontrol requeue`) left both ranks of a DDP job blocked here,
        # and the container has no scontrol; without it, the signal ends the ranks
        environment = SLURMEnvironment(auto_requeue=False)
        found = int(os.environ["SLURM_NTASKS_PER_NODE"]), int(os.environ["SLURM_NNODES"]), "srun"
    else:
        # Lightning starts --devices ranks itself. Named, so that it never probes for MPI: in a
        # Slurm step, mpi4py's MPI_Init without Slurm's PMI aborts the process.
        environment, found = LightningEnvironment(), (1, 1, None)
    devices, num_nodes = args.devices or found[0], args.num_nodes or found[1]
    if found[2] and (devices, num_nodes) != found[:2]:
        die(
            f"--devices {devices} --num-nodes {num_nodes} do not match what {found[2]} started "
            f"({found[0]} per node on {found[1]} node(s)); leave them out to take the launcher's"
        )
    return environment, devices, num_nodes


def main():
    args = arguments()
    import lightning as L
    import torch

    warnings.filterwarnings("ignore", ".*does not have many workers.*")  # 1 core per rank: none to spare
    environment, devices, num_nodes = layout(args)

    class Classifier(L.LightningModule):
        def __init__(self, lr):
            super().__init__()
            self.save_hyperparameters()
            self.net = make_model()

        def training_step(self, batch, index):
            images, labels = batch
            loss = torch.nn.functional.cross_entropy(self.net(images), labels)
            # averaged over the epoch and over the ranks
            self.log("loss", loss, on_step=False, on_epoch=True, sync_dist=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)

    class Report(L.Callback):
        """Rank 0's lines: who trains, where from, and the loss of each epoch."""

        def __init__(self):
            self.losses, self.started = [], time.perf_counter()

        def on_train_start(self, trainer, module):
            distributed = trainer.world_size > 1
            names = hosts(distributed)
            if trainer.is_global_zero:
                if args.resume:
                    print(
                        f"resumed from {trainer.ckpt_path}: epoch {trainer.current_epoch + 1}"
                        if trainer.ckpt_path
                        else f"no checkpoint in {args.checkpoint_dir}: starting from scratch",
                        flush=True,
                    )
                # a strategy of one device (SingleDeviceStrategy) has no cluster environment
                environment = getattr(trainer.strategy, "cluster_environment", None)
                environment = type(environment).__name__ if environment else "one device"
                print(
                    f"lightning_ddp: world {trainer.world_size} on {', '.join(names)}, "
                    f"{trainer.strategy.root_device.type}, {environment}, {trainer.num_nodes} node(s) x "
                    f"{trainer.num_devices} device(s), epochs {trainer.current_epoch + 1}-{trainer.max_epochs}",
                    flush=True,
                )

        def on_train_epoch_start(self, trainer, module):
            self.started = time.perf_counter()

        def on_train_epoch_end(self, trainer, module):
            loss = float(trainer.callback_metrics["loss"])
            self.losses.append(loss)
            if trainer.is_global_zero:
                print(
                    f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}: loss {loss:.4f}, "
                    f"{time.perf_counter() - self.started:.1f} s",
                    flush=True,
                )

    L.seed_everything(args.seed, verbose=False)
    module = Classifier(args.lr)
    loader = torch.utils.data.DataLoader(
        make_dataset(args.samples, args.seed), batch_size=args.batch_size, shuffle=True, drop_last=True
    )
    checkpoints = L.pytorch.callbacks.ModelCheckpoint(
        dirpath=args.checkpoint_dir, filename="{epoch}", save_last=True, save_top_k=1, every_n_epochs=1
    )
    report = Report()
    trainer = L.Trainer(
        strategy="ddp" if devices * num_nodes > 1 else "auto",
        accelerator=args.accelerator,
        devices=devices,
        num_nodes=num_nodes,
        max_epochs=args.epochs,
        logger=False,
        callbacks=[checkpoints, report],
        enable_progress_bar=False,
        enable_model_summary=False,
        plugins=[environment],
    )
    trainer.fit(module, loader, ckpt_path="last" if args.resume else None)
    if trainer.is_global_zero:
        if report.losses:
            print(f"first loss {report.losses[0]:.4f}", flush=True)
            print(f"last loss {report.losses[-1]:.4f}", flush=True)
        print(f"checkpoint -> {checkpoints.last_model_path}", flush=True)
        print(f"final parameters sha256 {parameters_digest(module.net)}", flush=True)
    trainer.strategy.barrier()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    leave(main())
