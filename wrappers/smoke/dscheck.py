"""DeepSpeed: every op the recipe promised shows installed in ds_report, and a real optimizer
step runs (CPUAdam on CPU, FusedAdam on a GPU) without compiling anything."""

import re
import subprocess
import time

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ROW = re.compile(r"^(\w+) \.+ \[(YES|NO)\] \.+ \[(OKAY|NO|-)\]", re.M)


def parse_report(text):
    """{op: (installed, compatible)} from ds_report's op table."""
    text = _ANSI.sub("", text)
    return {name: (installed == "YES", compatible == "OKAY")
            for name, installed, compatible in _ROW.findall(text)}


def check_ops(promised, timeout):
    try:
        result = subprocess.run(["ds_report"], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return {"verdict": "fail", "why": "ds_report is not installed (no DeepSpeed in this environment)"}
    except subprocess.TimeoutExpired:
        return {"verdict": "fail", "why": f"ds_report did not finish within {timeout:g} s"}
    ops = parse_report(result.stdout)
    if not ops:
        return {"verdict": "fail", "why": f"ds_report printed no op table (exit {result.returncode})"}
    missing = sorted(op for op in promised if not ops.get(op, (False, False))[0])
    installed = sorted(op for op, (yes, _) in ops.items() if yes)
    if missing:
        return {"verdict": "fail", "installed": installed, "missing": missing,
                "why": "promised but not installed: " + ", ".join(missing)}
    if not promised:
        return {"verdict": "none", "installed": installed, "why": "the image promises no prebuilt ops"}
    return {"verdict": "pass", "installed": installed,
            "why": f"all {len(promised)} promised ops installed: {', '.join(sorted(promised))}"}


def optimizer_step(device):
    """One real step with DeepSpeed's own optimizer; returns a verdict with the time it took."""
    import torch
    started = time.perf_counter()
    if device == "cpu":
        from deepspeed.ops.adam import DeepSpeedCPUAdam as Optimizer
        name = "DeepSpeedCPUAdam"
    else:
        from deepspeed.ops.adam import FusedAdam as Optimizer
        name = "FusedAdam"
    weight = torch.nn.Parameter(torch.ones(1024, device=device))
    optimizer = Optimizer([weight], lr=0.1)
    weight.grad = torch.ones_like(weight)
    optimizer.step()
    moved = bool((weight.detach() < 1).all().item())
    seconds = time.perf_counter() - started
    return {"verdict": "pass" if moved else "fail", "optimizer": name, "seconds": seconds,
            "why": f"{name} step {'moved' if moved else 'did not move'} the weights "
                   f"({seconds:.2f} s including the import)"}
