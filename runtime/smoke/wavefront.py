"""netcheck wavefront: the wavefront size DeepSpeed's ROCm ops were compiled with (the build's
JSON record) against the image's arch and, where a GPU is at hand, rocminfo's. Apart from the
library checks because it loads nothing: it reads a record and asks a tool (why it matters:
smoke/netcheck.py).

Example: python -m smoke.netcheck wavefront --record FILE --arch gfx90a --expected 64
"""

import json
import os
import re
import shutil

from . import commands
from .loading import Fail, last_line

ROCMINFO = "/opt/rocm/bin/rocminfo"
ROCMINFO_TIMEOUT = 30
_AGENT_NAME = re.compile(r"^\s*Name:\s+(\S+)")
_WAVEFRONT = re.compile(r"^\s*Wavefront Size:\s+(\d+)")


def read_record(path):
    """The build's wavefront record: {"arch": str, "wavefront_size": int, ...}."""
    try:
        with open(path) as file:
            record = json.load(file)
    except (OSError, ValueError) as error:
        raise Fail(
            f"cannot read the wavefront record {path}: {error}; expected the JSON the "
            "image's DeepSpeed build step writes"
        ) from None
    if not (
        isinstance(record, dict) and isinstance(record.get("arch"), str) and type(record.get("wavefront_size")) is int
    ):
        raise Fail(
            f'wavefront record {path} is not {{"arch": str, "wavefront_size": int, ...}}: {json.dumps(record)[:200]}'
        )
    return record


def check_wavefront(args):
    record = read_record(args.record)
    arch, size = record["arch"], record["wavefront_size"]
    if arch != args.arch:
        raise Fail(f"DeepSpeed's ops were built for {arch} ({args.record}); expected {args.arch}")
    if size != args.expected:
        raise Fail(
            f"DeepSpeed's ops were compiled with -DROCM_WAVEFRONT_SIZE={size} but "
            f"{args.arch} runs {args.expected}-wide wavefronts ({args.record}); rebuild with "
            f"the build's rocminfo stand-in reporting {args.arch}"
        )
    built = f"{args.record}: {arch}, wavefront {size}"
    gpu = rocminfo_gpu(args.rocminfo)
    if isinstance(gpu, str):
        return f"{built}; {gpu}: no GPU here to compare with"
    name, wavefront = gpu
    if wavefront != size:
        raise Fail(
            f"rocminfo reports {name} with {wavefront}-wide wavefronts but DeepSpeed's ops "
            f"were compiled with -DROCM_WAVEFRONT_SIZE={size} ({args.record})"
        )
    return f"{built}; rocminfo agrees ({name}, wavefront {wavefront})"


def rocminfo_gpu(path):
    """(name, wavefront size) of rocminfo's first GPU agent, or why there is none (a str)."""
    rocminfo = path or (ROCMINFO if os.path.isfile(ROCMINFO) else shutil.which("rocminfo"))
    if not rocminfo:
        return "no rocminfo"
    try:
        done = commands.run([rocminfo], ROCMINFO_TIMEOUT)
    except OSError as error:
        return f"cannot run {rocminfo} ({error.strerror})"
    if done.timed_out:
        return f"{rocminfo} {done.late}"
    if done.returncode != 0:
        return f"{rocminfo} exited {done.returncode} ({last_line(done.stderr, done.stdout)})"
    gpus = parse_rocminfo(done.stdout)
    return gpus[0] if gpus else f"{rocminfo} lists no GPU agent"


def parse_rocminfo(text):
    """[(name, wavefront size)] of rocminfo's gfx agents, in its order. An agent's Name line
    comes before its Wavefront Size; "Marketing Name" and the ISA's "amdgcn-..." names are not
    taken for agents."""
    agents, name = [], None
    for line in text.splitlines():
        if match := _AGENT_NAME.match(line):
            name = match.group(1)
        elif (match := _WAVEFRONT.match(line)) and name and name.startswith("gfx"):
            agents.append((name, int(match.group(1))))
            name = None
    return agents
