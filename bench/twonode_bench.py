"""Figures for two-node jobs, on the test cluster of two Slurm nodes in network namespaces
(tests/helpers/twonode_cluster.py; needs root), the CPU image and gloo:

1. launch: per launch mode (torchrun, srun, mpirun, deepspeed) with 1 and 2 ranks per node,
   seconds from sbatch to all ranks joined (the smoke report's first line appears in the log)
   and to the job's end (a short smoke suite), from job scripts `builder jobscript` writes;
2. overhead: the project's path (singularity_wrapper, launchenv) against the bare job users
   write by hand (both running the all-reduce check, 8 B to 1 MiB) (`srun apptainer exec IMAGE`
   with the ranks from Slurm's variables in the script, and `srun apptainer exec IMAGE torchrun`),
   2 ranks per node, ratio of the times from sbatch to the end, pair by pair, interleaved;
3. growth: 2, 4, 8 and 16 ranks over the two nodes under srun (each node says it has 8 CPUs;
   this machine's 2 are shared), seconds from sbatch to joined, and from joined to the end (two 1 MiB all-reduces,
   the first a warm-up, and the report).

Usage: python bench/twonode_bench.py IMAGE [--rounds N] [--only launch|overhead|growth] [--quick]
Each figure is the median of the rounds; the log lines are polled every 0.05 s.

--quick: the same two-node cluster (it starts in seconds) and job scripts, one round, every
job running one all-reduce check of 8 B to 64 KiB: the four launch modes with 1 rank a node,
the srun overhead pair, and growth at 2 ranks (about a minute). It checks the bench runs;
its figures are not to be quoted.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
WRAPPER = str(ROOT / "wrappers" / "singularity_wrapper")
SUITE = ("-m", "smoke", "all", "--sizes", "8:1M", "--warmup", "2", "--iters", "5")
# the overhead pairs run the all-reduce check alone: `all` also checks mpi4py when it knows
# srun started it (launchenv says so), which the bare script cannot tell it, so the two would
# not do the same work
ALLREDUCES = ("-m", "smoke", "allreduce", "--sizes", "8:1M", "--warmup", "2", "--iters", "5")
ONE_ALLREDUCE = ("-m", "smoke", "allreduce", "--sizes", "1M", "--warmup", "1", "--iters", "1")
JOINED = re.compile(r"^smoke: \d+ rank\(s\) on 2 node\(s\)", re.M)
QUICK_ALLREDUCES = ("-m", "smoke", "allreduce", "--sizes", "8:64K", "--warmup", "1", "--iters", "2")
LAUNCHES = ("torchrun", "srun", "mpirun", "deepspeed")
# what each part runs: full, and --quick
FULL = {
    "suite": SUITE,
    "allreduces": ALLREDUCES,
    "one": ONE_ALLREDUCE,
    "sizes": "8 B to 1 MiB",
    "one_text": "two 1 MiB all-reduces, the first a warm-up",
    "per_node": (1, 2),
    "overhead": ("srun", "torchrun"),
    "growth": (1, 2, 4, 8),
}
QUICK = {
    "suite": QUICK_ALLREDUCES,
    "allreduces": QUICK_ALLREDUCES,
    "one": QUICK_ALLREDUCES,
    "sizes": "8 B to 64 KiB (quick)",
    "one_text": "all-reduces of 8 B to 64 KiB (quick)",
    "per_node": (1,),
    "overhead": ("srun",),
    "growth": (1,),
}
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def jobscript(folder, name, launch, per_node, image, program):
    path = folder / f"{name}.sh"
    written = subprocess.run(
        [
            sys.executable,
            "-m",
            "builder",
            "jobscript",
            "cpu",
            "--site",
            "local",
            "--nodes",
            "2",
            "--tasks-per-node",
            str(per_node),
            "--launch",
            launch,
            "--time",
            "00:10:00",
            "--image",
            str(image),
            "--wrapper",
            WRAPPER,
            "--out",
            str(path),
            "--",
            *program,
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if written.returncode:
        raise SystemExit(written.stderr)
    return path


def bare_scripts(folder, runtime, image, subnet, program):
    """What users write without the project: apptainer exec under srun, ranks by hand."""
    head = (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node={tasks}\n#SBATCH --time=00:10:00\n"
        "set -euo pipefail\nexport OMP_NUM_THREADS=1 OMPI_MCA_btl_tcp_if_include=" + subnet + ".0/24\n"
        'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)" MASTER_PORT=29512\n'
    )
    suite = " ".join(program)
    srun = folder / "bare-srun.sh"
    srun.write_text(
        head.format(tasks=2) + f"srun {runtime} exec {image} sh -c 'RANK=$SLURM_PROCID "
        f"LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS exec python {suite}'\n"
    )
    torchrun = folder / "bare-torchrun.sh"
    torchrun.write_text(
        head.format(tasks=1) + f"srun {runtime} exec {image} torchrun --nnodes=2 "
        '--nproc-per-node=2 --rdzv-id="$SLURM_JOB_ID" --rdzv-backend=c10d '
        f'--rdzv-endpoint="$MASTER_ADDR:29400" {suite}\n'
    )
    return {"srun": srun, "torchrun": torchrun}


def run_job(script, env, *options, timeout=600):
    """(seconds to joined, seconds to the end, log) of one job, from sbatch."""
    log = script.with_suffix(f".{time.monotonic_ns()}.log")
    started = time.monotonic()
    submitted = subprocess.run(
        ["sbatch", "--parsable", f"--output={log}", *options, str(script)],
        env=env,
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if submitted.returncode:
        raise SystemExit(submitted.stderr)
    job, joined = submitted.stdout.strip().split(";")[0], None
    deadline = started + timeout
    while time.monotonic() < deadline:
        if joined is None and log.exists() and JOINED.search(log.read_text(errors="replace")):
            joined = time.monotonic() - started
        shown = subprocess.run(
            ["scontrol", "-o", "show", "job", job], env=env, capture_output=True, text=True, timeout=30
        ).stdout
        state = re.search(r"\bJobState=(\S+)", shown)
        if state and state.group(1) in DONE:
            ended = time.monotonic() - started
            text = log.read_text(errors="replace") if log.exists() else ""
            if state.group(1) != "COMPLETED" or not JOINED.search(text):
                raise SystemExit(f"{script.name}: job {job} {state.group(1)}\n{text[-3000:]}")
            return joined or ended, ended, text
        time.sleep(0.05)
    subprocess.run(["scancel", job], env=env, timeout=30)
    raise SystemExit(f"{script.name}: job {job} still running after {timeout} s")


def median(values):
    return statistics.median(values)


def launch_figures(folder, image, env, rounds, plan):
    scripts = {
        (launch, per_node): jobscript(folder, f"{launch}-{per_node}", launch, per_node, image, plan["suite"])
        for launch in LAUNCHES
        for per_node in plan["per_node"]
    }
    times = {key: [] for key in scripts}
    for _ in range(rounds):
        for key, script in scripts.items():
            joined, ended, _ = run_job(script, env)
            times[key].append((joined, ended))
    print(
        f"\n1. launch: seconds from sbatch (median of {rounds}), 2 nodes, "
        f"{'smoke suite' if plan['suite'] == SUITE else 'all-reduce check'} {plan['sizes']}"
    )
    print(f"   {'launch':<10} {'ranks/node':>10} {'joined':>8} {'end':>8}")
    for (launch, per_node), values in times.items():
        print(
            f"   {launch:<10} {per_node:>10} {median([v[0] for v in values]):8.1f} "
            f"{median([v[1] for v in values]):8.1f}"
        )


def overhead_figures(folder, image, env, rounds, runtime, subnet, plan):
    ours = {
        launch: jobscript(folder, f"ours-{launch}", launch, 2, image, plan["allreduces"]) for launch in plan["overhead"]
    }
    bare = bare_scripts(folder, runtime, image, subnet, plan["allreduces"])
    print(
        f"\n2. overhead: the project's job script against the bare one, 2 nodes x 2 ranks, all-reduce "
        f"{plan['sizes']}, sbatch to end (median of {rounds} pairs)"
    )
    for launch in ours:
        pairs = []
        for _ in range(rounds):
            _, with_ours, _ = run_job(ours[launch], env)
            _, without, _ = run_job(bare[launch], env)
            pairs.append((with_ours, without))
        ratio = median([a / b for a, b in pairs])
        print(
            f"   {launch:<10} project {median([p[0] for p in pairs]):6.1f} s, bare "
            f"{median([p[1] for p in pairs]):6.1f} s, ratio {ratio:.2f}"
        )


def growth_figures(folder, image, env, rounds, plan):
    print(
        f"\n3. growth under srun, {plan['one_text']} (median of {rounds}); the two nodes share "
        f"this machine's {os.cpu_count()} cores"
    )
    print(f"   {'ranks':>5} {'sbatch to joined':>17} {'joined to end':>14}")
    # the local site has 2 cores a node, so the script asks for 2 tasks a node and sbatch's
    # command line (which wins over #SBATCH lines) for the rest
    script = jobscript(folder, "growth", "srun", 2, image, plan["one"])
    for per_node in plan["growth"]:
        values = [run_job(script, env, f"--ntasks-per-node={per_node}")[:2] for _ in range(rounds)]
        print(
            f"   {2 * per_node:>5} {median([v[0] for v in values]):17.1f} {median([v[1] - v[0] for v in values]):14.1f}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("image", type=Path)
    parser.add_argument("--rounds", type=int, help="default 3, --quick 1")
    parser.add_argument("--only", choices=("launch", "overhead", "growth"))
    parser.add_argument("--quick", action="store_true", help="one round of fewer, smaller jobs: checks the bench runs")
    args = parser.parse_args()
    args.rounds = args.rounds or (1 if args.quick else 3)
    plan = QUICK if args.quick else FULL
    if os.geteuid() != 0:
        print("error: twonode_bench: the two-node cluster needs root", file=sys.stderr)
        return 2
    from helpers.twonode_cluster import TwoNodes

    from builder.host import toolbox

    image = args.image.resolve()
    runtime = shutil.which("apptainer") or shutil.which("singularity") or str(toolbox.command())
    folder = Path(tempfile.mkdtemp(prefix="hpcml-bench-"))
    cluster = TwoNodes(folder / "cluster", cpus=8).start()  # room for 8 ranks a node
    try:
        env = dict(
            cluster.env,
            HPCML_APPTAINER=runtime,
            HPCML_SITE_FILE=str(cluster.site_file()),
            OMPI_ALLOW_RUN_AS_ROOT="1",
            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        )
        for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH"):
            env.pop(name, None)
        print(f"two-node bench: {image.name}, {os.cpu_count()} cores, {args.rounds} round(s)")
        if args.only in (None, "launch"):
            launch_figures(folder, image, env, args.rounds, plan)
        if args.only in (None, "overhead"):
            overhead_figures(folder, image, env, args.rounds, runtime, cluster.subnet, plan)
        if args.only in (None, "growth"):
            growth_figures(folder, image, env, args.rounds, plan)
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
