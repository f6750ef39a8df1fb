"""What a built image holds, read from inside it: its OS release, its Debian packages, the
Python distributions its venv's interpreter sees, and DeepSpeed's compiled op libraries.

One `apptainer exec` of the runtime's probe (`python -m smoke.contents`, in every image with
the runtime wheel) under the image's own Python (the venv the recipe names), so the answer is
what that interpreter imports, as `pip list` and `dpkg -l` in the image show it; the smoke
suite's preflight finds the ops it checks with the same code. `-I` keeps the caller's
PYTHONPATH, user site-packages and working folder (which Apptainer carries in) out of it.
Example: read(apptainer, Path("images/cpu.sif"), "/opt/venv").

A wheel built in the image (DeepSpeed's) has no hash in the lock; its block records its
sha256 in the image, read from the unpacked root file system (built_wheels).
"""

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .. import runner
from ..errors import ToolError

PROBE = ("-I", "-m", "smoke.contents")  # the venv's python's arguments: runtime/smoke/contents.py


@dataclass(frozen=True)
class Inventory:
    """Example: Inventory(os={"ID": "debian", "VERSION_ID": "12"}, debs=(("bash", "5.2.15-2+b7",
    "amd64"),), dists=(("torch", "2.13.0+cpu"),), ops=("cpu_adam_op",),
    wheels=(("deepspeed", "0.19.8", "3f1c..."),))."""

    os: dict
    debs: tuple  # (package, version, architecture), installed ones only
    dists: tuple  # (name as its metadata spells it, version)
    ops: tuple  # DeepSpeed's compiled op libraries (ops/ and inference/v2/), by file stem
    wheels: tuple = ()  # (name, version, sha256) of each wheel built and recorded in the image


def read(apptainer, image: Path, venv: str) -> Inventory:
    result = runner.run([apptainer, "exec", str(image), f"{venv}/bin/python", *PROBE], check=False, timeout=300)
    return _answer(result, image)


def read_unpacked(proot, root: Path, venv: str, image: Path) -> Inventory:
    """The same probe in the image unpacked at ``root``, under proot: where Apptainer can
    make no user namespace to run it (the unprivileged build's host)."""
    argv = [proot, "-r", str(root), "-w", "/", "-b", "/proc", "-b", "/dev", "/usr/bin/env", "-i"]
    argv += ["PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C.UTF-8", f"{venv}/bin/python", *PROBE]
    env = dict(os.environ, PROOT_NO_SECCOMP="1")  # slower, and right with every proot (host/route_facts.py)
    return _answer(runner.run(argv, check=False, timeout=300, env=env), image)


def _answer(result, image: Path) -> Inventory:
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


# sha256sum's line of a wheel: "HEX  deepspeed-0.19.8-cp311-cp311-linux_x86_64.whl"
_WHEEL_SUM = re.compile(r"([0-9a-f]{64}) [ *]([^-\s/]+)-([^-\s/]+)(-[^-\s/]+){2,3}\.whl")


def built_wheels(record) -> tuple:
    """((name, version, sha256), ...) from a wheel record's text (sha256sum's lines; render's
    blocks/deepspeed.py WHEEL_RECORD); () for None. A line of another shape names nothing."""
    found = (_WHEEL_SUM.fullmatch(line.strip()) for line in (record or "").splitlines())
    return tuple((match[2], match[3], match[1]) for match in found if match)
