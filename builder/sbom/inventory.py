"""What a built image holds, read from inside it: its OS release, its Debian packages, the
Python distributions its venv's interpreter sees, and DeepSpeed's compiled op libraries.

One `apptainer exec` of the runtime's probe (`python -m smoke.contents`, in every image with
the runtime wheel) under the image's own Python (the venv the recipe names), so the answer is
what that interpreter imports, as `pip list` and `dpkg -l` in the image show it; the smoke
suite's preflight finds the ops it checks with the same code. `-I` keeps the caller's
PYTHONPATH, user site-packages and working folder (which Apptainer carries in) out of it.
Example: read(apptainer, Path("images/cpu.sif"), "/opt/venv").
"""

import json
from dataclasses import dataclass
from pathlib import Path

from .. import runner
from ..errors import ToolError

PROBE = ("-I", "-m", "smoke.contents")  # the venv's python's arguments: runtime/smoke/contents.py


@dataclass(frozen=True)
class Inventory:
    """Example: Inventory(os={"ID": "debian", "VERSION_ID": "12"}, debs=(("bash", "5.2.15-2+b7",
    "amd64"),), dists=(("torch", "2.13.0+cpu"),), ops=("cpu_adam_op",))."""

    os: dict
    debs: tuple  # (package, version, architecture), installed ones only
    dists: tuple  # (name as its metadata spells it, version)
    ops: tuple  # DeepSpeed's compiled op libraries (ops/ and inference/v2/), by file stem


def read(apptainer, image: Path, venv: str) -> Inventory:
    result = runner.run([apptainer, "exec", str(image), f"{venv}/bin/python", *PROBE], check=False, timeout=300)
    if "No module named smoke.contents" in result.stderr:
        raise ToolError(f"{image} has no smoke.contents (its runtime wheel is older than the SBOM's probe): rebuild it")
    if result.returncode != 0:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""]
        raise ToolError(f"could not read the contents of {image}: the probe failed ({last[0]})")
    try:
        found = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise ToolError(f"could not read the contents of {image}: the probe printed {result.stdout[-200:]!r}") from None
    return Inventory(
        os=found["os"],
        debs=tuple(sorted(tuple(deb) for deb in found["debs"])),
        dists=tuple(sorted((tuple(dist) for dist in found["dists"]), key=lambda d: d[0].lower())),
        ops=tuple(found["ops"]),
    )
