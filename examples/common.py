"""What the examples share: small data sets made on the spot (images for the CNN, token
sequences for the language models), the CNN, rank-0 logging, the Slurm signal that asks for a
checkpoint, atomic file writes, and options read from a config file.

The data set: 8x8 grey images of 10 classes, each class a fixed random pattern plus noise,
the same on every rank for the same seed (nothing is downloaded; scikit-learn's digits are
8x8 too, so a real data set drops in as a TensorDataset of the same shape).
"""

import argparse
import hashlib
import json
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


def make_sequences(samples, length, vocab, seed):
    """A LongTensor (samples, length) of token sequences a causal language model learns fast,
    identical for the same seed: each sequence starts at a random token and goes on by a fixed
    random successor table (token t is always followed by successor[t]), so every token but the
    first is predictable and the loss falls from about log(vocab) towards zero."""
    generator = torch.Generator().manual_seed(seed)
    successor = torch.randperm(vocab, generator=generator)
    sequences = torch.empty(samples, length, dtype=torch.long)
    sequences[:, 0] = torch.randint(0, vocab, (samples,), generator=generator)
    for position in range(1, length):
        sequences[:, position] = successor[sequences[:, position - 1]]
    return sequences


def make_language_model(layers=2, heads=2, width=64, vocab=256, length=64):
    """A GPT-2 of `layers` layers initialised at random from a config object: nothing is
    downloaded (about 120k parameters with the defaults, fast on a CPU). Without dropout, as
    pretraining runs often are: a resumed run then draws nothing from the random generators
    that a run straight through drew elsewhere (a data loader's iterator takes a seed from
    torch's generator when it starts), and ends with the same parameters."""
    import transformers

    config = transformers.GPT2Config(
        n_layer=layers,
        n_head=heads,
        n_embd=width,
        vocab_size=vocab,
        n_positions=max(64, length),
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = transformers.GPT2LMHeadModel(config)
    model.loss_type = "ForCausalLM"  # what GPT-2 uses anyway; said here, transformers does not warn
    return model


def make_model():
    """Two convolutions and a linear layer: about 6k parameters, fast on a CPU."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 16 x 4 x 4
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 32 x 2 x 2
        nn.Flatten(),
        nn.Linear(128, 10),
    )


def parameters_digest(model):
    """sha256 over every parameter's bytes, in order: equal digests, equal parameters bit for bit.
    `model` is a module or its state dict."""
    digest = hashlib.sha256()
    for name, tensor in (model if isinstance(model, dict) else model.state_dict()).items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def training_device():
    """The one place the examples take their device from: this rank's GPU where there is one
    (LOCAL_RANK picks it, as every launcher sets it), else the CPU. Whatever a collective gets
    must be made on it: NCCL takes device tensors only (gloo takes CPU tensors too, so a CPU
    run alone would not show a tensor left behind)."""
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    return torch.device("cpu")


def hosts(distributed):
    """The sorted host names of all ranks: proof that the job spans the nodes it asked for."""
    names = [socket.gethostname()]
    if distributed:
        names = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(names, socket.gethostname())
    return sorted(set(names))


def launched_world():
    """WORLD_SIZE as the launcher set it (1 without one). Stops, exit status 2, when srun started
    several tasks and nothing turned Slurm's variables into torch's: frameworks that read only
    RANK and WORLD_SIZE (Hugging Face's Trainer, Accelerate) would train each task alone."""
    tasks = int(os.environ.get("SLURM_STEP_NUM_TASKS") or 1)
    if "WORLD_SIZE" not in os.environ and tasks > 1:
        die(
            f"srun started {tasks} tasks but nothing set RANK and WORLD_SIZE: run the script through the "
            f"image's launchenv, `python -m launchenv -- python {sys.argv[0]} ...`, as the job scripts of "
            "--launch srun do"
        )
    return int(os.environ.get("WORLD_SIZE", "1"))


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

    def agreed(self, distributed, device):
        """True on every rank once any rank got the signal (ranks get it at slightly
        different moments; they must stop at the same step). `device`: the one the ranks
        train on, where the backend reduces (NCCL refuses a CPU tensor)."""
        flag = torch.tensor([1 if self.received else 0], device=device)
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


LANGUAGE_MODEL_COUNTS = (
    "steps",
    "samples",
    "length",
    "vocab",
    "layers",
    "heads",
    "width",
    "batch_size",
    "log_every",
    "save_every",
)


def language_model_parser(doc, out):
    """The options the two language-model examples share (hf_trainer.py, accelerate_loop.py):
    the run, the generated data, the model's size and the checkpoints in ``out``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps in all (a resumed run goes on to this)")
    parser.add_argument("--samples", type=int, default=4096, help="generated sequences")
    parser.add_argument("--length", type=int, default=32, help="tokens per sequence")
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--width", type=int, default=64, help="embedding size")
    parser.add_argument("--batch-size", type=int, default=16, help="per rank")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=5, help="steps between loss lines")
    parser.add_argument("--save-every", type=int, default=20, help="steps between checkpoints (and one at the end)")
    parser.add_argument("--out", default=out, help="where the checkpoints go")
    parser.add_argument("--resume", action="store_true", help="go on from the last checkpoint in --out if there is one")
    return parser


def check_language_model_arguments(args):
    for name in LANGUAGE_MODEL_COUNTS:
        if getattr(args, name) < 1:
            die(f"--{name.replace('_', '-')} must be positive")
    if args.length > 1024:
        die("--length must be at most 1024 (the model's positions)")
    return args


def parse_with_config(parser, argv=None):
    """parser.parse_args, with `--config FILE` (JSON, or YAML where PyYAML is installed) giving
    defaults: its keys are the long options' names (`batch_size` or `batch-size`), and options
    given on the command line win over the file."""
    parser.add_argument(
        "--config", metavar="FILE", help='JSON or YAML file of option defaults, e.g. {"steps": 60, "lr": 0.003}'
    )
    first, _ = parser.parse_known_args(argv)
    if first.config:
        try:
            with open(first.config) as handle:
                text = handle.read()
            if first.config.endswith((".yaml", ".yml")):
                import yaml

                values = yaml.safe_load(text) or {}
            else:
                values = json.loads(text)
        except Exception as error:  # unreadable, neither JSON nor YAML, or no PyYAML
            die(f"--config {first.config}: {' '.join(str(error).split())}")
        if not isinstance(values, dict):
            die(f"--config {first.config}: expected a mapping of option names to values")
        known = {action.dest for action in parser._actions}
        values = {str(key).replace("-", "_"): value for key, value in values.items()}
        unknown = sorted(set(values) - known)
        if unknown:
            die(f"--config {first.config}: unknown option(s) {', '.join(unknown)}")
        parser.set_defaults(**values)
    return parser.parse_args(argv)


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
