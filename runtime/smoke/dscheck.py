"""DeepSpeed: ds_report lists the ops the image's recipe knows and shows exactly the promised
ones installed, each promised op loads from its prebuilt module, and the engine trains a few
steps under ZeRO 1, 2 and 3 on every rank. Nothing may compile at run time: any attempt to
build an op just in time fails the check and names the op."""

import contextlib
import importlib
import importlib.util
import io
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import warnings

from . import commands
from .verdict import Verdict

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# names of 23 characters or more get no dots: "deepspeed_not_implemented  [NO] ....... [OKAY]"
_ROW = re.compile(r"^(\w+) \.* ?\[(YES|NO)\] \.+ \[(OKAY|NO|-)\]", re.M)

# (ZeRO stage, optimizer type as users name it in a config, offload the optimizer to the CPU)
ENGINE_RUNS = (
    (1, "Adam", False),
    (1, "AdamW", False),
    (2, "Adam", False),
    (2, "AdamW", False),
    (3, "Adam", False),
    (3, "AdamW", False),
    (3, "Adam", True),
    (3, "AdamW", True),
)
STEPS = 3


class JITBuild(RuntimeError):
    """DeepSpeed tried to compile an op at run time."""


def parse_report(text):
    """{op: (installed, compatible)} from ds_report's op table."""
    text = _ANSI.sub("", text)
    return {name: (installed == "YES", compatible == "OKAY") for name, installed, compatible in _ROW.findall(text)}


def check_ops(promised, listed, timeout):
    """ds_report's rows are the recipe's listed ops, and its installed column the promised ones."""
    # ds_report as a module of this interpreter: the script on PATH may belong to another
    # Python, and an install without scripts (pip --target) has none
    if importlib.util.find_spec("deepspeed") is None:
        return Verdict.failed(f"DeepSpeed is not installed for {sys.executable}")
    result = commands.run([sys.executable, "-m", "deepspeed.env_report"], timeout)
    if result.timed_out:
        return Verdict.failed(f"ds_report {result.late}")
    ops = parse_report(result.stdout)
    if not ops:
        return Verdict.failed(f"ds_report printed no op table (exit {result.returncode})")
    installed = sorted(op for op, (yes, _) in ops.items() if yes)
    problems = []
    unknown = sorted(set(ops) - set(listed or ops))
    if unknown:
        problems.append("DeepSpeed lists ops the recipe does not know: " + ", ".join(unknown))
    unseen = sorted(set(listed or ()) - set(ops))
    if unseen:
        problems.append("the recipe knows ops DeepSpeed does not list: " + ", ".join(unseen))
    missing = sorted(set(promised) - set(installed))
    if missing:
        problems.append("promised but not installed: " + ", ".join(missing))
    unlisted = sorted(set(installed) - set(promised))
    if unlisted:
        problems.append("installed but not in the image's labels: " + ", ".join(unlisted))
    found = {"installed": installed, "missing": missing, "unlisted": unlisted}
    if problems:
        return Verdict.failed("; ".join(problems), **found)
    if not promised:
        return Verdict.none("the image promises no prebuilt ops", **found)
    return Verdict.passed(
        f"ds_report shows exactly the {len(promised)} promised ops installed: {', '.join(sorted(promised))}", **found
    )


@contextlib.contextmanager
def no_jit():
    """Any just-in-time op build raises JITBuild naming the op; torch's extensions folder is a
    fresh one that must still be empty at the end (a build by some other path shows there)."""

    def refuse(builder, verbose=True):
        raise JITBuild(
            f"DeepSpeed tried to compile the {builder.name} op at run time; it is not prebuilt in this image"
        )

    patched = []
    for name in ("op_builder.builder", "deepspeed.ops.op_builder.builder"):
        try:  # an installed DeepSpeed may carry its builders under both names
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "OpBuilder") and "jit_load" in vars(module.OpBuilder):
            patched.append((module.OpBuilder, vars(module.OpBuilder)["jit_load"]))
            module.OpBuilder.jit_load = refuse
    folder = tempfile.mkdtemp(prefix="smoke-torch-extensions-")
    before = os.environ.get("TORCH_EXTENSIONS_DIR")
    os.environ["TORCH_EXTENSIONS_DIR"] = folder
    try:
        yield
        built = sorted(os.listdir(folder))
        if built:
            raise JITBuild(f"ops were compiled at run time into {folder}: {', '.join(built)}")
    finally:
        for cls, original in patched:
            cls.jit_load = original
        if before is None:
            os.environ.pop("TORCH_EXTENSIONS_DIR", None)
        else:
            os.environ["TORCH_EXTENSIONS_DIR"] = before
        shutil.rmtree(folder, ignore_errors=True)


def load_ops(promised):
    """Each promised op loads from its prebuilt module (no compiler needed)."""
    from deepspeed.ops.op_builder.all_ops import ALL_OPS

    failed, started = {}, time.perf_counter()
    try:
        with no_jit():
            for op in promised:
                try:
                    ALL_OPS[op].load(verbose=False)
                except Exception as error:  # noqa: BLE001 - each op's own error is the verdict
                    failed[op] = f"{type(error).__name__}: {_first_line(error)}"
    except JITBuild as error:
        failed["(run time)"] = str(error)
    seconds = time.perf_counter() - started
    if failed:
        return Verdict.failed("; ".join(f"{op}: {why}" for op, why in sorted(failed.items())), failed=failed)
    return Verdict.passed(f"all {len(promised)} promised ops load prebuilt ({seconds:.2f} s)", seconds=seconds)


def engine(session, runs=ENGINE_RUNS):
    """deepspeed.initialize and a few steps for each run on this rank; a verdict for this rank."""
    import deepspeed
    import torch

    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    done, started, where = [], time.perf_counter(), "init_distributed"
    try:
        # DeepSpeed's banners and torch's deprecation warnings would bury the verdicts
        with no_jit(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            deepspeed.init_distributed(dist_backend=session.backend)
            for stage, optimizer, offload in runs:
                where = _name(stage, optimizer, offload)
                done.append(_train(torch, deepspeed, session.device, stage, optimizer, offload))
            where = "the end of the check"
    except Exception as error:  # noqa: BLE001 - the verdict says what broke
        return Verdict.failed(
            f"rank {session.rank}: {type(error).__name__} at {where}: {_first_line(error)}", runs=done
        )
    bad = [run for run in done if not run["learned"]]
    seconds = time.perf_counter() - started
    if bad:
        return Verdict.failed(
            f"rank {session.rank}: the loss did not fall under " + ", ".join(run["name"] for run in bad), runs=done
        )
    return Verdict.passed(
        f"{len(done)} engines ({', '.join(run['name'] for run in done)}) trained "
        f"{STEPS} steps each, nothing compiled ({seconds:.1f} s)",
        runs=done,
        seconds=seconds,
    )


def _train(torch, deepspeed, device, stage, optimizer, offload):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    zero = {"stage": stage}
    if offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    config = {
        "train_micro_batch_size_per_gpu": 8,
        "gradient_accumulation_steps": 1,
        "optimizer": {"type": optimizer, "params": {"lr": 0.01}},
        "zero_optimization": zero,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }
    started = time.perf_counter()
    model_engine, used, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    inputs = torch.randn(8, 16, generator=torch.Generator().manual_seed(1)).to(model_engine.device)
    target = torch.zeros(8, 4, device=model_engine.device)
    losses = []
    for _ in range(STEPS):
        loss = torch.nn.functional.mse_loss(model_engine(inputs).float(), target)
        model_engine.backward(loss)
        model_engine.step()
        losses.append(float(loss.detach()))
    name = _name(stage, optimizer, offload)
    inner = getattr(used, "optimizer", used)
    if hasattr(model_engine, "destroy"):  # frees ZeRO-3's hooks before the next engine
        model_engine.destroy()
    return {
        "name": name,
        "stage": stage,
        "optimizer": optimizer,
        "offload": offload,
        "class": type(inner).__name__,
        "losses": losses,
        "learned": losses[-1] < losses[0],
        "seconds": time.perf_counter() - started,
    }


def _name(stage, optimizer, offload):
    return f"ZeRO {stage} {optimizer}{' offload' if offload else ''}"


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else ""
