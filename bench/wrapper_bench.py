"""Overhead of singularity_wrapper: `singularity_wrapper exec IMAGE true` against
`apptainer exec IMAGE true`, same image, interleaved runs in one process.

Usage: python bench/wrapper_bench.py IMAGE [--runs N] [--quick]    (goal: overhead under 50 ms)
--quick: 3 pairs instead of 20 (a few seconds; checks the bench runs, not a figure to quote).
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
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, timeout=120)
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("image", type=Path)
    parser.add_argument("--runs", type=int, help="pairs to time (default 20, --quick 3)")
    parser.add_argument("--quick", action="store_true", help="3 pairs: checks the bench runs")
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 20)
    from builder.host import toolbox

    runtime = shutil.which("apptainer") or shutil.which("singularity") or str(toolbox.command())
    env = dict(os.environ, HPCML_APPTAINER=runtime, HPCML_SITE="local")
    env.pop("HPCML_SITE_FILE", None)
    plain = [runtime, "exec", str(args.image), "true"]
    wrapped = [str(ROOT / "wrappers" / "singularity_wrapper"), "--image", str(args.image), "exec", "true"]
    timed(plain, env), timed(wrapped, env)  # warm the page cache
    bare, via = [], []
    for _ in range(runs):  # interleaved, so drift hits both
        bare.append(timed(plain, env))
        via.append(timed(wrapped, env))
    b, w = statistics.median(bare), statistics.median(via)
    ratio = statistics.median(v / p for v, p in zip(via, bare))
    print(f"apptainer exec true:           median {b * 1000:7.1f} ms over {runs} runs")
    print(f"singularity_wrapper exec true: median {w * 1000:7.1f} ms")
    print(f"overhead: {(w - b) * 1000:.1f} ms, ratio {ratio:.3f} (median of the pairs)   (goal: under 50 ms)")


if __name__ == "__main__":
    main()
