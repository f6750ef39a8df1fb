"""Start-up of the command line (issue 48): `python -m builder ARGS` of this checkout against
the same commands of the builder and recipes at --baseline REV, interleaved pairs in one run.

Commands: --help, list, show cpu, check, render cpu (into a folder of the bench's own; the
first step of `make build`). list and show read an empty images folder, so neither side
inspects an image. Each side runs in its own tree with that tree first on PYTHONPATH: this
checkout's working tree, and REV exported with `git archive` into a temporary folder.
Usage: python bench/startup_bench.py --baseline REV [--runs N] [--quick]   (goal: every command under 300 ms)
--quick: 2 pairs instead of 10 (about 30 s against a slow baseline; checks the bench runs, not a
figure to quote).
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 300


def commands(work: Path):
    """(name, arguments) of each command timed."""
    empty = work / "no-images"
    empty.mkdir(exist_ok=True)
    return [
        ("--help", ["--help"]),
        ("list", ["list", "--images", empty]),
        ("show cpu", ["show", "cpu", "--images", empty]),
        ("check", ["check"]),
        ("render cpu", ["render", "cpu", "--out", work / "rendered"]),
    ]


def snapshot(rev: str, tree: Path) -> Path:
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def side_env(tree: Path) -> dict:
    """Only the tree's builder and recipes: no HPCML_ setting of the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCML_")}
    env["PYTHONPATH"] = str(tree)
    found = subprocess.run(
        [sys.executable, "-c", "import builder; print(builder.__file__)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(found).is_relative_to(tree):
        sys.exit(f"error: {tree} imports the builder of {found}")
    return env


def timed(tree: Path, env: dict, args) -> tuple[float, float, int]:
    """Wall and CPU seconds of one run, and its exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "builder", *map(str, args)],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.returncode


def bench(args, sides, runs):
    """Medians of wall and CPU ms on each side, the median of the pairs' wall ratio, exit statuses."""
    (new, new_env), (old, old_env) = sides
    timed(new, new_env, args), timed(old, old_env, args)  # warm the page cache
    pairs = [(timed(new, new_env, args), timed(old, old_env, args)) for _ in range(runs)]
    median = [[statistics.median(pair[side][i] * 1000 for pair in pairs) for i in (0, 1)] for side in (0, 1)]
    ratio = statistics.median(a[0] / b[0] for a, b in pairs)
    statuses = {pair[side][2] for pair in pairs for side in (0, 1)}
    return median, ratio, statuses


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", metavar="REV", required=True, help="the commit to compare with")
    parser.add_argument("--runs", type=int, help="pairs per command (default 10, --quick 2)")
    parser.add_argument("--quick", action="store_true", help="2 pairs: checks the bench runs")
    args = parser.parse_args()
    runs = args.runs or (2 if args.quick else 10)
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as folder:
        work = Path(folder)
        old = snapshot(args.baseline, work / "baseline")
        sides = [(ROOT, side_env(ROOT)), (old, side_env(old))]
        print(f"python -m builder ARGS: this checkout against {args.baseline}, median of {runs} pairs")
        print(f"{'ARGS':<12} {'wall ms':>8} {'cpu ms':>8}   {'baseline wall':>13} {'cpu ms':>8}   ratio (wall)")
        for name, argv in commands(work):
            ((wall, cpu), (old_wall, old_cpu)), ratio, statuses = bench(argv, sides, runs)
            note = f"   exit {sorted(statuses)}" if statuses != {0} else ""
            print(f"{name:<12} {wall:8.1f} {cpu:8.1f}   {old_wall:13.1f} {old_cpu:8.1f}   {ratio:.3f}{note}")
        print(f"goal: every command under {GOAL_MS} ms")


if __name__ == "__main__":
    main()
