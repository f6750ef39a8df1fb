"""Build-time benchmark for the CPU target, all measured in one run on this machine.

Prints these ratios:
  full build / full build at --baseline REV   (only with --baseline; goal for issue 13: < 0.5)
  no-op rebuild / full build          (goal: under 1 %)
  top-layer rebuild / full build      (goal: under 25 %; an extra pip package is added)
  image size / what it must contain   (the venv plus the installed OS packages, uncompressed)

Each full build starts from an empty images directory and an empty private cache (its own
XDG_CACHE_HOME: no layers, no kept outputs; the toolbox, if one is needed, is provisioned
before timing starts). What is built is a commit, never the working tree, so editing the
checkout while the bench runs changes nothing: HEAD (or --rev), and with --baseline REV the
same target with the builder and recipes of an older commit first, so both figures come from
the same machine and run.
Usage: python bench/build_bench.py [--rev REV] [--baseline REV] [--keep DIR]
       (about 13 minutes on 2 cores, plus the baseline's full build)
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRA = ("six", "1.17.0")          # a small pure-Python package for the top-layer rebuild


def builder(*args, env, root=ROOT):
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        sys.exit(f"builder {' '.join(map(str, args))} failed:\n{result.stdout[-3000:]}")
    return elapsed, result.stdout


def private_cache(cache: Path, root: Path) -> dict:
    """An environment whose cache is ``cache`` (emptied), with the toolbox linked in."""
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), PYTHONPATH=str(root))
    if not (shutil.which("apptainer") or shutil.which("singularity")):
        # the toolbox is set-up, not build time; reuse the user's if it exists
        home_box = Path.home() / ".cache" / "hpc-ml-containers" / "toolbox"
        target = cache / "hpc-ml-containers" / "toolbox"
        target.parent.mkdir(parents=True, exist_ok=True)
        if home_box.is_dir():
            target.symlink_to(home_box)
        else:
            builder("toolbox", "provision", env=env, root=root)
    return env


def snapshot(rev: str, tree: Path) -> Path:
    """The files of commit ``rev`` in ``tree``."""
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def baseline_build(rev: str, work: Path) -> float:
    """A full build with the builder and recipes of commit ``rev``, from empty caches."""
    tree = snapshot(rev, work / "baseline")
    env = private_cache(work / "cache-baseline", tree)
    seconds, _ = builder("build", "cpu", "--images", work / "images-baseline", env=env, root=tree)
    shutil.rmtree(work / "images-baseline", ignore_errors=True)     # 3 GB of layers
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="HEAD", help="the commit to measure (default HEAD)")
    parser.add_argument("--baseline", metavar="REV", help="also time a full build at this commit")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="hpcml-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    root = snapshot(args.rev, work / "current")
    recipes, images, cache = root / "recipes", work / "images", work / "cache"
    before = baseline_build(args.baseline, work) if args.baseline else None
    env = private_cache(cache, root)

    common = ("--recipes", recipes, "--images", images)
    full, _ = builder("build", "cpu", *common, env=env, root=root)
    if before:
        print(f"full build at {args.baseline}: {before:8.1f} s")
        print(f"full build now:    {full:8.1f} s   ratio {full / before:.3f}   (goal < 0.5)")
    else:
        print(f"full build:        {full:8.1f} s")
    noop, out = builder("build", "cpu", *common, env=env, root=root)
    assert "up to date" in out, out
    print(f"no-op rebuild:     {noop:8.2f} s   ratio {noop / full:.4f}  (goal < 0.01)")

    versions = recipes / "versions.yaml"
    versions.write_text(versions.read_text().replace(
        "python_packages:\n", f"python_packages:\n  {EXTRA[0]}: {EXTRA[1]}\n"))
    target = recipes / "targets" / "cpu.yaml"
    target.write_text(target.read_text().replace("packages: [numpy, matplotlib]", f"packages: [numpy, matplotlib, {EXTRA[0]}]"))
    top, out = builder("build", "cpu", *common, env=env, root=root)
    assert "devel layer" in out and "up to date" in out, out
    print(f"top-layer rebuild: {top:8.1f} s   ratio {top / full:.3f}   (goal < 0.25)")

    sif = images / "cpu.sif"
    apptainer = shutil.which("apptainer") or shutil.which("singularity") or \
        str(cache / "hpc-ml-containers" / "toolbox" / "bin" / "apptainer")
    measure = ("du -sb /opt/venv | cut -f1; "
               "dpkg-query -Wf '${Installed-Size}\\n' | awk '{s+=$1} END {print s*1024}'")
    out = subprocess.run([apptainer, "exec", sif, "sh", "-c", measure], capture_output=True,
                         text=True, check=True).stdout.split()
    venv, packages = int(out[0]), int(out[1])
    size = sif.stat().st_size
    print(f"image size:        {size / 1e6:8.0f} MB  (SIF, compressed squashfs)")
    print(f"must contain:      {(venv + packages) / 1e6:8.0f} MB  (venv {venv / 1e6:.0f} MB + "
          f"OS packages {packages / 1e6:.0f} MB, uncompressed)   ratio {size / (venv + packages):.3f}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
