"""DeepSpeed's ops for the CPU target compiled inside its devel layer the way the top layer
builds them, `parallel` (from the sdist with build_ext -j, the .def's lines from
deepspeed.compile_commands), against `serial` (`pip wheel`, one op after another, as before),
timed side by side in one run (rounds interleaved, parallel first) with the same build
environment (the block's DS_BUILD_* switches, the host's pip settings as a build gets them).
Prints each time and the ratio parallel / serial.

Usage: python bench/ds_compile_bench.py [--images DIR] [--rounds N] [--quick]
       (about 9 minutes a round on 2 cores; needs images/cpu.devel.sif (make build) and a
       reachable package index)
--quick: the same lines and environment with every DS_BUILD_* switch set to 0, so both ways
build DeepSpeed's wheel without compiling a single op (about a minute: the sdist download
and its Python files); it checks the bench runs, its ratio says nothing about compiling.
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from builder.host.progress import Progress  # noqa: E402
from builder.host.which_apptainer import ready_apptainer  # noqa: E402
from builder.layerbuild import host_settings  # noqa: E402
from builder.recipes.tree import RecipeTree  # noqa: E402
from builder.render.blocks import deepspeed  # noqa: E402
from builder.render.layer_sharing import plan_layers  # noqa: E402
from builder.render.parts import HOST_MOUNT, HOST_SETTINGS  # noqa: E402


def script(way, version):
    """The shell lines of one compile: $ds_tmp made in /tmp (a .def uses a fixed folder of the
    root it builds), removed at the end."""
    lines = deepspeed.compile_commands(version)
    if way == "serial":
        lines = [f"pip wheel --no-build-isolation --no-deps --no-cache-dir -w {deepspeed.WHEELS} deepspeed=={version}"]
    return (
        "\n".join(
            [
                "set -eu",
                f". {HOST_SETTINGS}",
                *deepspeed.EXEC_TMP,
                """trap 'rm -rf "$ds_tmp"' EXIT""",
                *lines,
                f"ls -l {deepspeed.WHEELS}/deepspeed-*.whl",
            ]
        )
        + "\n"
    )


def compile_once(apptainer, devel, target, env, host, way):
    argv = [
        apptainer,
        "exec",
        "--cleanenv",
        "--bind",
        f"{host}:{HOST_MOUNT}",
        f"--env=PATH={target.python.venv}/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        *[f"--env={k}={v}" for k, v in env],
        str(devel),
        "sh",
        "-c",
        script(way, target.deepspeed.version),
    ]
    started = time.monotonic()
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600)
    seconds = time.monotonic() - started
    if result.returncode:
        sys.exit(f"{way} compile failed (exit {result.returncode}):\n{result.stdout[-3000:]}")
    wheel = next(line for line in reversed(result.stdout.splitlines()) if "deepspeed-" in line)
    print(f"  {way:<8} {seconds:7.1f} s   {wheel.split()[4]} bytes", flush=True)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=Path, default=ROOT / "images")
    parser.add_argument("--rounds", type=int, default=1, help="pairs to time (default 1)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every DS_BUILD_* switch 0: the wheel without any op compiled (no DeepSpeed compile)",
    )
    options = parser.parse_args()
    devel = (options.images / "cpu.devel.sif").resolve()
    if not devel.is_file():
        sys.exit(f"{devel} is missing; run: make build")
    tree = RecipeTree(ROOT / "recipes")
    target = tree.target("cpu")
    build = next(p for p in deepspeed.parts(target) if p.stage == "build")
    env = list(build.build_env)
    if options.quick:
        env = [(k, "0" if k.startswith("DS_BUILD_") else v) for k, v in env]
    print(
        f"DeepSpeed {target.deepspeed.version} in {devel.name}: "
        + " ".join(f"{k}={v}" for k, v in env if k.startswith("DS_"))
    )
    apptainer = ready_apptainer(target.sites[0])
    work = Path(tempfile.mkdtemp(prefix="hpcml-ds-bench-"))
    try:
        # the host's CA bundle, pip indexes and wheels, as a build's %post gets them
        host_settings.write(work / "host", plan_layers(tree, "cpu")["image"].pip_indexes, Progress())
        pairs = []
        for _ in range(options.rounds):  # interleaved, so drift hits both ways
            pairs.append(
                (
                    compile_once(apptainer, devel, target, env, work / "host", "parallel"),
                    compile_once(apptainer, devel, target, env, work / "host", "serial"),
                )
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    parallel, serial = (statistics.median(way) for way in zip(*pairs))
    ratio = statistics.median(p / s for p, s in pairs)
    print(
        f"parallel {parallel:.1f} s, serial {serial:.1f} s; ratio parallel / serial {ratio:.2f} "
        f"(median of {len(pairs)} pair(s))"
    )


if __name__ == "__main__":
    main()
