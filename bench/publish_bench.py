"""Publishing and verifying, side by side with doing the same work by hand, interleaved in
one run: `publish --force` against `cp IMAGE` + `sha256sum`, `verify` against `sha256sum -c
SHA256SUMS`, and a published entry point (`bin/python -c pass`) against `apptainer exec IMAGE
python -c pass`.

Usage: python bench/publish_bench.py IMAGE [--runs N] [--quick]
       (goals: publish and verify within 1.2x of the by-hand commands; entry point under 50 ms more)
--quick: one pair of each (three for the entry point) instead of 7 (21): well under a minute
for the CPU image; checks the bench runs, not a figure to quote.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(argv, env, cwd=None):
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, timeout=600)
    return time.perf_counter() - started


def compare(name, first, second, runs, goal):
    a, b = [], []
    for _ in range(runs):  # interleaved, so drift hits both
        a.append(first())
        b.append(second())
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = statistics.median(x / y for x, y in zip(a, b))
    print(
        f"{name:<26} {ma * 1000:8.1f} ms  vs by hand {mb * 1000:8.1f} ms  ratio {ratio:.3f}"
        f"   (median of {runs} pairs; goal {goal})"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("image", type=Path)
    parser.add_argument("--runs", type=int, help="pairs to time (default 7, --quick 1)")
    parser.add_argument("--quick", action="store_true", help="one pair of each: checks the bench runs")
    args = parser.parse_args()
    args.runs = args.runs or (1 if args.quick else 7)
    from builder.host import toolbox

    image = args.image.resolve()
    runtime = shutil.which("apptainer") or shutil.which("singularity") or str(toolbox.command())
    env = dict(os.environ, HPCML_APPTAINER=runtime, PYTHONPATH=str(ROOT))
    smoke = image.parent / f"{image.stem}.smoke"
    skip = [] if (smoke / "image.sha256").is_file() else ["--skip-smoke"]
    print(f"image {image} ({image.stat().st_size / 1e6:.0f} MB); smoke report: " + ("skipped" if skip else "used"))
    with tempfile.TemporaryDirectory(dir=image.parent) as scratch:
        prefix = Path(scratch) / "prefix"
        prefix.mkdir()  # an admin's folder: publish makes none
        publish = [
            sys.executable,
            "-m",
            "builder",
            "publish",
            image.stem,
            "--images",
            str(image.parent),
            "--prefix",
            str(prefix),
            "--version",
            "bench",
            "--force",
            *skip,
        ]
        copy = Path(scratch) / "copy.sif"

        def by_hand():
            copy.unlink(missing_ok=True)
            started = time.perf_counter()
            subprocess.run(["cp", str(image), str(copy)], check=True, timeout=600)
            subprocess.run(["sha256sum", str(copy)], check=True, stdout=subprocess.DEVNULL, timeout=600)
            return time.perf_counter() - started

        timed(publish, env, cwd=ROOT)
        compare("publish --force", lambda: timed(publish, env, cwd=ROOT), by_hand, args.runs, "<= 1.2")
        root = prefix / "pytorch" / "bench"
        verify = [sys.executable, "-m", "builder", "verify", "--prefix", str(prefix), "pytorch/bench"]
        check = ["sha256sum", "--quiet", "-c", "SHA256SUMS"]
        compare(
            "verify", lambda: timed(verify, env, cwd=ROOT), lambda: timed(check, env, cwd=root), args.runs, "<= 1.2"
        )
        entry = [str(root / "bin" / "python"), "-c", "pass"]
        plain = [runtime, "exec", str(image), "python", "-c", "pass"]
        timed(entry, env), timed(plain, env)
        compare(
            "bin/python -c pass",
            lambda: timed(entry, env),
            lambda: timed(plain, env),
            args.runs * 3,
            "under 50 ms more",
        )


if __name__ == "__main__":
    main()
