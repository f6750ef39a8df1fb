"""Every bench runs (issue 30): `python bench/<name>.py --quick ...` as a user runs it, in a
fresh interpreter, against the real CPU image (the session's `cpu_image`, whose folder also
holds the devel layer), and prints the ratio and figure lines it exists for. Quick modes use
tiny sizes and no from-scratch builds (each bench's --help says what its quick mode runs), so
a moved import, a changed signature or a renamed option fails here instead of in the next
person's measurement. No time is asserted: the figures come from the full modes
(docs/performance.md)."""

import os
import re
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from helpers.slurm_jobs import NEEDS_TWO_NODES

NUMBER = r"-?\d+(\.\d+)?"
# bench: (arguments after the script, the lines its output must hold, timeout in seconds)
# The timeouts bound a loaded 2-core machine; smoke_bench's covers its first run, which
# makes the host venv and compiles the host's JIT ops once (later quick runs: about a minute).
BENCHES = {
    "build_bench": (
        ["--image", "{image}"],
        [
            rf"^no-op rebuild: +{NUMBER} s +ratio {NUMBER}",
            rf"^top-layer rebuild: +{NUMBER} s +ratio {NUMBER}",
            rf"^must contain: .*ratio {NUMBER}",
        ],
        600,
    ),
    "cross_compile_bench": (
        ["--arm-image", "{arm_image}"],
        [rf"^  cross +{NUMBER} s", rf"^  emulated +{NUMBER} s", rf"ratio emulated / cross {NUMBER}"],
        1200,
    ),
    "ds_compile_bench": (
        ["--images", "{images}"],
        [rf"^  parallel +{NUMBER} s", rf"^  serial +{NUMBER} s", rf"ratio parallel / serial {NUMBER}"],
        900,
    ),
    "layer_bench": (
        ["--images", "{images}"],
        [
            rf"^packed +base +{NUMBER} s",
            rf"^uncompressed +base +{NUMBER} s",
            rf"^base layer time +uncompressed / packed: {NUMBER}",
            rf"^base \+ image time uncompressed / packed: {NUMBER}",
        ],
        600,
    ),
    "publish_bench": (
        ["{image}"],
        [
            rf"^publish --force +{NUMBER} ms .* ratio {NUMBER}",
            rf"^verify +{NUMBER} ms .* ratio {NUMBER}",
            rf"^bin/python -c pass +{NUMBER} ms .* ratio {NUMBER}",
        ],
        600,
    ),
    "smoke_bench": (
        ["{image}"],
        [
            rf"^all-reduce 1M busbw.* ratio {NUMBER}",
            rf"^first CPUAdam step.*\(ratio {NUMBER},.*JIT / prebuilt {NUMBER}x",
            rf"^first DeepSpeed engine step.*JIT / prebuilt {NUMBER}x",
        ],
        2400,
    ),
    "twonode_bench": (
        ["{image}"],
        [
            *(rf"^   {launch} +1 +{NUMBER} +{NUMBER}$" for launch in ("torchrun", "srun", "mpirun", "deepspeed")),
            rf"^   srun +project +{NUMBER} s, bare +{NUMBER} s, ratio {NUMBER}",
            rf"^ +2 +{NUMBER} +{NUMBER}$",
        ],
        900,
    ),
    "wrapper_bench": (["{image}"], [rf"^overhead: {NUMBER} ms, ratio {NUMBER}"], 300),
    "pyenv_bench": (
        ["{image}"],
        [
            rf"^env of 1 distributions: lock {NUMBER} s, build {NUMBER} s",
            rf"^import numpy with the env: .* ratio {NUMBER}",
        ],
        600,
    ),
    # against this checkout's own HEAD: the quick run checks the bench, not a figure
    "startup_bench": (
        ["--baseline", "HEAD"],
        [rf"^{re.escape(name)} +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER}" for name in ("--help", "show cpu")],
        300,
    ),
}


# The three slowest quick runs (a minute or more each, and on a fresh machine smoke_bench's host
# venv and ops, about 7 minutes) run in `make test-full`, so that `make test` fits its hour.
SLOW = {"cross_compile_bench", "smoke_bench", "twonode_bench"}


def _marks(name):
    return [*([NEEDS_TWO_NODES] if name == "twonode_bench" else []), *([pytest.mark.full] if name in SLOW else [])]


@pytest.mark.parametrize("name", [pytest.param(name, marks=_marks(name)) for name in sorted(BENCHES)])
def test_bench_runs_quick_and_prints_its_figures(name, cpu_image, request):
    arguments, expected, timeout = BENCHES[name]
    # the aarch64 test image only where asked (it is built under QEMU when the cache lacks it)
    arm = request.getfixturevalue("arm_image") if any("{arm_image}" in a for a in arguments) else None
    argv = [
        sys.executable,
        str(ROOT / "bench" / f"{name}.py"),
        "--quick",
        *(a.format(image=cpu_image, images=cpu_image.parent, arm_image=arm) for a in arguments),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SING_IMAGE", "HPCML_SITE_FILE")}
    started = time.monotonic()
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - started
    print(f"{name} --quick: {seconds:.0f} s\n{result.stdout}", file=sys.stderr)
    assert result.returncode == 0, (
        f"{' '.join(argv)}: exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    missing = [line for line in expected if not re.search(line, result.stdout, re.M)]
    assert not missing, f"{name} printed no line matching {missing}:\n{result.stdout}"
