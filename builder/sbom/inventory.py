"""What a built image holds, read from inside it: its OS release, its Debian packages, the
Python distributions its venv's interpreter sees, and DeepSpeed's compiled op libraries.

One `apptainer exec` of a small probe under the image's own Python (the venv the recipe
names), so the answer is what that interpreter imports, as `pip list` and `dpkg -l` in the
image show it. Example: read(apptainer, Path("images/cpu.sif"), "/opt/venv").
"""

import json
from dataclasses import dataclass
from pathlib import Path

from .. import runner
from ..errors import ToolError

# Runs in the image: plain Python 3, no third-party import. Distributions seen twice on
# sys.path (venv and system) count once, the first found, as `pip list` shows them.
PROBE = r"""
import importlib.metadata as md, importlib.util, json, pathlib, re, subprocess
release = dict(
    line.split("=", 1) for line in pathlib.Path("/etc/os-release").read_text().splitlines() if "=" in line
)
shown = subprocess.run(
    ["dpkg-query", "-W", "-f=${Package}\t${Version}\t${Architecture}\t${db:Status-Abbrev}\n"],
    capture_output=True, text=True, check=True,
).stdout
debs = [fields[:3] for fields in (line.split("\t") for line in shown.splitlines()) if fields[3].startswith("ii")]
dists, seen = [], set()
for dist in md.distributions():
    name = dist.metadata["Name"]
    key = re.sub(r"[-_.]+", "-", name or "").lower()
    if name and key not in seen:
        seen.add(key)
        dists.append([name, dist.version])
spec = importlib.util.find_spec("deepspeed")
ops = []
if spec and spec.submodule_search_locations:
    for folder in spec.submodule_search_locations:
        ops += [p.name.split(".")[0] for p in pathlib.Path(folder, "ops").rglob("*.so")]
release = {k: v.strip('"') for k, v in release.items()}
print(json.dumps({"os": release, "debs": debs, "dists": dists, "ops": sorted(ops)}))
"""


@dataclass(frozen=True)
class Inventory:
    """Example: Inventory(os={"ID": "debian", "VERSION_ID": "12"}, debs=(("bash", "5.2.15-2+b7",
    "amd64"),), dists=(("torch", "2.13.0+cpu"),), ops=("cpu_adam_op",))."""

    os: dict
    debs: tuple  # (package, version, architecture), installed ones only
    dists: tuple  # (name as its metadata spells it, version)
    ops: tuple  # DeepSpeed's compiled op libraries, by file stem


def read(apptainer, image: Path, venv: str) -> Inventory:
    result = runner.run([apptainer, "exec", str(image), f"{venv}/bin/python", "-c", PROBE], timeout=300)
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
