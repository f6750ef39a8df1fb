"""The smoke suite (wrappers/smoke/) installed into the image's venv as the `smoke` package,
with config.json saying what this image promises: its DeepSpeed ops and, per site, the network
between nodes and the all-reduce references. `python -m smoke all` then needs no repository."""

import json
from pathlib import Path

from ..embed import SITE_PACKAGES, heredoc
from ..parts import Part
from ..shell import cmd

SOURCE = Path(__file__).resolve().parents[2] / "wrappers" / "smoke"
END = "SMOKE_FILE"
SITE_KEYS = ("network", "allreduce")


def config(target) -> dict:
    sites = {}
    for site in target.sites:
        facts = {key: site.data[key] for key in SITE_KEYS if key in site.data}
        facts["slurm_mpi"] = site.data["mpi"]["slurm_mpi"]
        facts["gpus_per_node"] = site.gpus_per_node
        sites[site.name] = facts
    return {"target": target.name, "sites": sites,
            "deepspeed": {"accelerator": target.deepspeed.accelerator,
                          "listed_ops": list(target.deepspeed.listed),
                          "promised_ops": list(target.deepspeed.promised)},
            "comm": {"library": target.comm_library,
                     "plugin": target.plugin.name if target.plugin else None}}


def files(target) -> dict:
    found = {path.name: path.read_text() for path in sorted(SOURCE.glob("*.py"))}
    found["config.json"] = json.dumps(config(target), indent=1, sort_keys=True) + "\n"
    return found


def parts(target):
    post = [SITE_PACKAGES, 'mkdir -p "$site_packages/smoke"']
    for name, text in files(target).items():
        post += heredoc(f'"$site_packages/smoke/{name}"', text, END)
    test = [cmd("python", "-m", "smoke", "--help") + " > /dev/null",
            'smoke_out="$(mktemp -d)"',
            cmd("python", "-m", "smoke", "allreduce", "--sizes", "8:64K", "--warmup", "1",
                "--iters", "2", "--timeout", "120") + ' --out "$smoke_out"',
            # the promised ops are exactly the installed ones, each loads, and the engine trains
            # under ZeRO 1-3 with nothing compiled (the image has no compiler to do so)
            cmd("python", "-m", "smoke", "deepspeed", "--timeout", "600") + ' --out "$smoke_out"',
            'rm -rf "$smoke_out"']
    return [
        Part(block="smoke", stage="build", post=tuple(post)),
        Part(block="smoke", stage="final", test=tuple(test),
             help=("Smoke tests: `python -m smoke all` (under srun, mpirun or torchrun for "
                   "several ranks) checks all-reduce sums and bandwidth against the site's "
                   "reference, the network NCCL/RCCL used, DeepSpeed's prebuilt ops and its engine "
                   "under ZeRO 1-3, mpi4py and a DDP "
                   "run; it writes smoke-report/smoke.json and smoke-busbw.png.",)),
    ]
