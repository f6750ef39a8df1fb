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
Usage: python bench/build_bench.py [--rev REV] [--baseline REV] [--keep DIR] [--quick [--image SIF]]
       (about 20 minutes on 2 cores, plus the baseline's full build)

--quick: a dry run of the same steps. The builder of the commit runs each build for real
(layer keys, cache, locks, plans, host settings, the recipe edit for the top-layer rebuild)
but a stub stands in for `apptainer build` and writes each layer as a tiny SIF holding its
definition and a shell (the real Apptainer's `sif` commands assemble it, and the builder's
packing step unpacks and packs it as any layer), so nothing is compiled or installed. The
image-size line then measures the real image given by --image (skipped without one). Its
times are the builder's own overhead, not build figures.
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRA = ("six", "1.17.0")  # a small pure-Python package for the top-layer rebuild
# --quick: what runs in place of `apptainer build`: a SIF of a shell and the definition, made
# with the real Apptainer's `sif` commands (the builder's packing uses them too); it answers the
# two reads the SBOM makes of the image, its labels and one probe of its contents
STUB = r"""#!/bin/sh
real=REAL_APPTAINER
case "$1" in
  inspect) echo '{"data": {"attributes": {"labels": {}}}}'; exit 0 ;;
  exec) exec python3 "$(dirname "$0")/stub-probe.py" ;;
  sif) exec "$real" "$@" ;;
  build) ;;
  *) echo "build_bench stub: only build, inspect, exec and sif" >&2; exit 2 ;;
esac
if [ "$2" = --help ]; then echo "      --mksquashfs-args string"; exit 0; fi
for arg; do out="$definition"; definition="$arg"; done
echo "INFO:    Starting build (build_bench stub)"
root="$out.root"
mkdir -p "$root/bin" "$root/.singularity.d"
cp /bin/sh "$root/bin/sh"
cp "$definition" "$root/.singularity.d/Singularity"
mksquashfs "$root" "$out.squashfs" -noappend -quiet -no-progress >/dev/null
rm -rf "$root"
"$real" sif new "$out" && "$real" sif add --datatype 4 --parttype 2 --partfs 1 --partarch 2 "$out" "$out.squashfs"
status=$?
rm -f "$out.squashfs"
exit $status
"""


# --quick: what the SBOM's probe finds in the stub's image: what the CPU target's locks say, so
# that the build's check of the image against them passes (recipes folder filled in)
PROBE = r"""import json, re
from pathlib import Path
locks = Path(RECIPES) / "locks" / "cpu"
pins = re.findall(r"^([A-Za-z0-9._-]+)==(\S+) --hash", (locks / "python.txt").read_text(), re.M)
final = (locks / "debian-final.txt").read_text()
debs = re.findall(r"^([a-z0-9][a-z0-9+.-]+)=(\S+) (\S+)(?: sha256:[0-9a-f]{64})?$", final, re.M)
dists = [list(pin) for pin in pins] + [["hpc-ml-runtime", "0.1.0"], ["pip", "23.0.1"]]
print(json.dumps({"os": {"ID": "debian", "VERSION_ID": "12"}, "debs": debs, "dists": dists, "ops": []}))
"""


def builder(*args, env, root=ROOT):
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "builder", *map(str, args)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        sys.exit(f"builder {' '.join(map(str, args))} failed:\n{result.stdout[-3000:]}")
    return elapsed, result.stdout


def private_cache(cache: Path, root: Path, stub=None) -> dict:
    """An environment whose cache is ``cache`` (emptied), with the toolbox linked in (or the
    stub runtime named by HPCML_APPTAINER)."""
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), PYTHONPATH=str(root))
    if stub:
        env["HPCML_APPTAINER"] = str(stub)
    elif not (shutil.which("apptainer") or shutil.which("singularity")):
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


def baseline_build(rev: str, work: Path, stub=None) -> float:
    """A full build with the builder and recipes of commit ``rev``, from empty caches."""
    tree = snapshot(rev, work / "baseline")
    env = private_cache(work / "cache-baseline", tree, stub)
    seconds, _ = builder("build", "cpu", "--images", work / "images-baseline", env=env, root=tree)
    shutil.rmtree(work / "images-baseline", ignore_errors=True)  # 3 GB of layers
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rev", default="HEAD", help="the commit to measure (default HEAD)")
    parser.add_argument("--baseline", metavar="REV", help="also time a full build at this commit")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="dry run: a stub writes the layers instead of apptainer build (nothing compiled)",
    )
    parser.add_argument("--image", type=Path, help="--quick: the real image whose size to measure")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="hpcml-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        measure(args, work)
    finally:
        if not args.keep:  # a failed run or Ctrl-C leaves nothing either
            shutil.rmtree(work, ignore_errors=True)


def measure(args, work: Path):
    stub = None
    if args.quick:
        stub = work / "stub-apptainer"
        stub.write_text(STUB.replace("REAL_APPTAINER", shlex.quote(real_apptainer())))
        stub.chmod(0o755)
        (work / "stub-probe.py").write_text(f"RECIPES = {str(work / 'current' / 'recipes')!r}\n{PROBE}")
        print("quick mode: a stub stands in for apptainer build (the times are the builder's overhead)")
    root = snapshot(args.rev, work / "current")
    recipes, images, cache = root / "recipes", work / "images", work / "cache"
    before = baseline_build(args.baseline, work, stub) if args.baseline else None
    env = private_cache(cache, root, stub)

    def goal(text):
        return "" if args.quick else f"   (goal {text})"

    common = ("--recipes", recipes, "--images", images)
    full, _ = builder("build", "cpu", *common, env=env, root=root)
    if before:
        print(f"full build at {args.baseline}: {before:8.1f} s")
        print(f"full build now:    {full:8.1f} s   ratio {full / before:.3f}{goal('< 0.5')}")
    else:
        print(f"full build:        {full:8.1f} s")
    noop, out = builder("build", "cpu", *common, env=env, root=root)
    assert "up to date" in out, out
    print(f"no-op rebuild:     {noop:8.2f} s   ratio {noop / full:.4f}{goal('< 0.01')}")

    add_package(recipes)
    builder("lock", "cpu", "--recipes", recipes, env=env, root=root)  # the new pin, locked as a user would
    top, out = builder("build", "cpu", *common, env=env, root=root)
    assert "devel layer" in out and "up to date" in out and "building the image layer" in out, out
    print(f"top-layer rebuild: {top:8.1f} s   ratio {top / full:.3f}{goal('< 0.25')}")

    if args.quick and not args.image:
        print("image size:        skipped (--quick without --image)")
    else:
        image_size(args.image if args.quick else images / "cpu.sif")


def add_package(recipes: Path):
    """EXTRA pinned in versions.yaml and added to the CPU target's packages."""
    for path, old, new in [
        (recipes / "versions.yaml", "python_packages:\n", f"python_packages:\n  {EXTRA[0]}: {EXTRA[1]}\n"),
        (recipes / "targets" / "cpu.yaml", "packages: [numpy, matplotlib", f"packages: [numpy, matplotlib, {EXTRA[0]}"),
    ]:
        text = path.read_text()
        if old not in text:
            sys.exit(f"{path} has no '{old.strip()}': the top-layer rebuild needs a new way to add a package")
        path.write_text(text.replace(old, new, 1))


def real_apptainer() -> str:
    """The installed Apptainer, or the toolbox's."""
    sys.path.insert(0, str(ROOT))
    from builder.host import toolbox

    return shutil.which("apptainer") or shutil.which("singularity") or str(toolbox.command())


def image_size(sif: Path):
    """The SIF's size against what it must hold: the venv and the installed OS packages."""
    apptainer = real_apptainer()
    measure = "du -sb /opt/venv | cut -f1; dpkg-query -Wf '${Installed-Size}\\n' | awk '{s+=$1} END {print s*1024}'"
    out = subprocess.run(
        [apptainer, "exec", sif, "sh", "-c", measure], capture_output=True, text=True, check=True, timeout=600
    ).stdout.split()
    venv, packages = int(out[0]), int(out[1])
    size = sif.stat().st_size
    print(f"image size:        {size / 1e6:8.0f} MB  (SIF, compressed squashfs)")
    print(
        f"must contain:      {(venv + packages) / 1e6:8.0f} MB  (venv {venv / 1e6:.0f} MB + "
        f"OS packages {packages / 1e6:.0f} MB, uncompressed)   ratio {size / (venv + packages):.3f}"
    )


if __name__ == "__main__":
    main()
