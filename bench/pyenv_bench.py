"""A project env (hpcml env): the time to lock and to build one of about ten packages with
uv's and pip's caches warm (goal: 60 s or less together), the files inside it against the one
file outside, and the start of `python -c "import X"` through the wrapper with the env bound
against without it, interleaved runs in one process.

Usage: python bench/pyenv_bench.py IMAGE [--runs N] [--quick]
--quick: one package and 3 pairs (checks the bench runs, not a figure to quote).
The packages come from the host pip's sources (PyPI, or its mirror).
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

# what a training project adds to the image: configs, logging, tokenizers, tables (wandb, orjson,
# sentencepiece: compiled wheels; hydra's antlr4 runtime: an sdist built in the image)
PACKAGES = ["hydra-core==1.3.2", "orjson", "tabulate", "wandb", "sentencepiece", "jsonargparse", "einops"]
QUICK = ["tabulate"]


def hpcml(*args):
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "builder", *map(str, args)], cwd=ROOT, capture_output=True, text=True
    )
    if result.returncode != 0:
        sys.exit(f"hpcml {' '.join(map(str, args))}: {result.stderr.strip()}")
    return time.perf_counter() - started


def timed(argv, env):
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("image", type=Path)
    parser.add_argument("--runs", type=int, help="pairs to time (default 15, --quick 3)")
    parser.add_argument("--quick", action="store_true", help="one package, 3 pairs: checks the bench runs")
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 15)
    from builder.host import toolbox

    runtime = shutil.which("apptainer") or shutil.which("singularity") or str(toolbox.command())
    image = args.image.resolve()
    with tempfile.TemporaryDirectory(prefix="hpcml-pyenv-bench-") as folder:
        folder = Path(folder)
        requirements = folder / "requirements.txt"
        requirements.write_text("".join(f"{p}\n" for p in (QUICK if args.quick else PACKAGES)))
        lock, out = folder / "requirements.cpu.lock", folder / "requirements.cpu.sqsh"
        hpcml("env", "lock", "cpu", requirements)  # the first: fills uv's cache
        hpcml("env", "build", "cpu", lock, "--images", image.parent)  # the first: fills pip's
        locked = hpcml("env", "lock", "cpu", requirements)
        built = hpcml("env", "build", "cpu", lock, "--images", image.parent)
        listing = subprocess.run(["unsquashfs", "-lls", str(out)], capture_output=True, text=True).stdout
        files = sum(1 for line in listing.splitlines() if line.startswith("-"))
        size = out.stat().st_size
        distributions = sum(1 for line in lock.read_text().splitlines() if "==" in line and not line.startswith("#"))
        first = (QUICK if args.quick else PACKAGES)[0].split("=")[0].replace("-core", "")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SING_", "HPCML_SITE_FILE"))}
        env.update(HPCML_APPTAINER=runtime, HPCML_SITE="local", SING_IMAGE=str(image))
        wrapper = str(ROOT / "wrappers" / "singularity_wrapper")
        plain = [wrapper, "exec", "python", "-c", "import numpy"]
        with_env = dict(env, SING_PYENV=str(out))
        timed(plain, env), timed(plain, with_env)  # the page cache
        bare, bound, theirs = [], [], []
        for _ in range(runs):  # interleaved, so drift hits both
            bare.append(timed(plain, env))
            bound.append(timed(plain, with_env))
            theirs.append(timed([wrapper, "exec", "python", "-c", f"import {first}"], with_env))
    ratio = statistics.median(b / p for b, p in zip(bound, bare))
    print(f"env of {distributions} distributions: lock {locked:.1f} s, build {built:.1f} s, together "
          f"{locked + built:.1f} s   (caches warm; goal: 60 s or less)")  # fmt: skip
    print(f"files: {files} inside the env, 1 outside ({size / 1e6:.1f} MB)")
    print(f"import numpy without the env: median {statistics.median(bare) * 1000:.0f} ms over {runs} runs")
    print(f"import numpy with the env:    median {statistics.median(bound) * 1000:.0f} ms, ratio {ratio:.3f}")
    print(f"import {first} from the env:  median {statistics.median(theirs) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
