"""Overhead of singularity_wrapper: `singularity_wrapper exec IMAGE true` against
`apptainer exec IMAGE true`, same image, interleaved runs in one process.

Usage: python bench/wrapper_bench.py IMAGE [--runs N]      (goal: overhead under 50 ms)
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(argv, env):
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    from builder.build.layers import toolbox
    runtime = shutil.which("apptainer") or shutil.which("singularity") or str(toolbox.command())
    env = dict(os.environ, HPCML_APPTAINER=runtime, HPCML_SITE="local")
    plain = [runtime, "exec", str(args.image), "true"]
    wrapped = [str(ROOT / "wrappers" / "singularity_wrapper"), "--image", str(args.image), "exec", "true"]
    timed(plain, env), timed(wrapped, env)                     # warm the page cache
    bare, via = [], []
    for _ in range(args.runs):                                 # interleaved, so drift hits both
        bare.append(timed(plain, env))
        via.append(timed(wrapped, env))
    b, w = statistics.median(bare), statistics.median(via)
    print(f"apptainer exec true:          median {b * 1000:7.1f} ms over {args.runs} runs")
    print(f"singularity_wrapper exec true: median {w * 1000:7.1f} ms")
    print(f"overhead: {(w - b) * 1000:.1f} ms, ratio {w / b:.3f}   (goal: under 50 ms)")


if __name__ == "__main__":
    main()
