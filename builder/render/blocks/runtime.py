"""The runtime package (runtime/: launchenv and the smoke suite) installed into the image's
venv from its wheel, and image.json beside it: what this image promises (its DeepSpeed ops,
its communication library). Site facts (references, networks) are not baked in: the wrapper
hands them to the smoke suite at run time.

The definition names the wheel by file and sha256: `python -m builder build` passes its path
as the build argument RUNTIME_WHEEL (by hand, after `python -m builder render` wrote it there:
`--build-arg RUNTIME_WHEEL=containers/<wheel>`).

Emits: "runtime", last of the top layer: build (the wheel as a %files entry, its sha256 check
and install, image.json under the venv) and final (the %tests: launchenv, the smoke preflight,
a small all-reduce and the DeepSpeed check; %help).
Reads: target.name, .python.venv, .deepspeed (accelerator, listed and promised ops),
.cuda_min_driver (versions.yaml, CUDA images), .amdgpu_runs and .amdgpu_modules (versions.yaml,
ROCm images: AMD's driver matrix), the communication stack (rccl_ofi.comm_stack: .comm.library,
.plugin, .libfabric); of the sites, only target.archs (site.gpu.arch) and target.wavefront_size
(site.gpu.wavefront_size).

Example, recipes/targets/lumi-rocm.yaml (`comm` as in the libfabric block) renders
(containers/lumi-rocm.def, shortened):

    echo '--- build: runtime'
    echo '<sha256>  /opt/hpcml-runtime/hpc_ml_runtime-0.1.0-py3-none-any.whl' | sha256sum --check --quiet -
    pip install --no-cache-dir --no-deps --no-index /opt/hpcml-runtime/hpc_ml_runtime-0.1.0-py3-none-any.whl
    ...
    cat > /opt/venv/share/hpc-ml-runtime/image.json <<'IMAGE_JSON'
    {"comm": {
      "library": "rccl",
    ...
"""

import json

from hpcml_facts import DeepSpeedPromise, GpuPromise, ImageFacts

from ... import contract
from ...recipes.target_model import Target
from ...values.apptainer import build_arg
from ...values.shell import cmd, python_check
from .. import runtime_wheel
from ..parts import Part
from . import rccl_ofi

STAGING = "/opt/hpcml-runtime"
END = "IMAGE_JSON"

_LAUNCHENV_CHECK = """
import launchenv
launch = launchenv.detect({})
assert (launch.source, launch.rank, launch.world_size) == ("single", 0, 1), launch
print("launchenv:", launchenv.__file__)
"""


def image_facts(target: Target) -> ImageFacts:
    # the archs of its sites' GPUs, which torch must carry and the ops were compiled for
    gpu = GpuPromise(
        tuple(target.archs),
        dict(target.cuda_min_driver or {}),
        target.wavefront_size or None,
        dict(target.amdgpu_runs),
        dict(target.amdgpu_modules),
    )
    return ImageFacts(
        target=target.name,
        gpu=gpu if target.archs else None,
        deepspeed=DeepSpeedPromise(
            target.deepspeed.accelerator, tuple(target.deepspeed.listed), tuple(target.deepspeed.promised)
        ),
        comm=rccl_ofi.comm_stack(target),
    )


def parts(target: Target):
    wheel = runtime_wheel.current()
    staged = f"{STAGING}/{wheel.name}"
    facts = _two_levels(image_facts(target).to_json())
    image_json = f"{target.python.venv}/{contract.IMAGE_FACTS}"  # smoke reads it under sys.prefix
    post = [
        f"echo {cmd(f'{wheel.sha256}  {staged}')} | sha256sum --check --quiet -",
        cmd("pip", "install", "--no-cache-dir", "--no-deps", "--no-index", staged),
        cmd("rm", "-rf", STAGING),
        cmd("mkdir", "-p", image_json.rsplit("/", 1)[0]),
        f"cat > {cmd(image_json)} <<'{END}'",
        *facts.splitlines(),
        END,
    ]
    test = _test_lines()
    return [
        Part(
            block="runtime",
            stage="build",
            files=((build_arg(runtime_wheel.BUILD_ARG), staged),),
            post=tuple(post),
            build_args=(runtime_wheel.BUILD_ARG,),
        ),
        Part(
            block="runtime",
            stage="final",
            test=tuple(test),
            help=(
                "`import launchenv; launchenv.apply()` sets RANK, LOCAL_RANK, WORLD_SIZE, "
                "LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT from torchrun, MPI or Slurm.",
                "Smoke tests: `python -m smoke all` (under srun, mpirun or torchrun for "
                "several ranks) checks all-reduce sums and bandwidth against the site's "
                "reference, the network NCCL/RCCL used, DeepSpeed's prebuilt ops and its "
                "engine under ZeRO 1-3, mpi4py and a DDP run; it writes "
                f"{contract.SMOKE_FOLDER}/{contract.SMOKE_REPORT} and {contract.SMOKE_PLOT}. "
                "Site references come from the wrapper (singularity_wrapper), or --site-facts FILE.",
            ),
        ),
    ]


def _test_lines() -> list:
    """%test: launchenv, the suite's CLI, the preflight, a small all-reduce and DeepSpeed's ops."""
    return [
        python_check("python", _LAUNCHENV_CHECK),
        cmd("python", "-m", "smoke", "--help") + " > /dev/null",
        # the torch build the image promises; on a build host without a GPU the GPU checks
        # say so and pass
        cmd("python", "-m", "smoke", "preflight"),
        'smoke_out="$(mktemp -d)"',
        cmd(
            "python",
            "-m",
            "smoke",
            "allreduce",
            "--sizes",
            "8:64K",
            "--warmup",
            "1",
            "--iters",
            "2",
            "--timeout",
            "120",
        )
        + ' --out "$smoke_out"',
        # the promised ops are exactly the installed ones, each loads, and the engine trains
        # under ZeRO 1-3 with nothing compiled (the image has no compiler to do so)
        cmd("python", "-m", "smoke", "deepspeed", "--timeout", "600") + ' --out "$smoke_out"',
        'rm -rf "$smoke_out"',
    ]


def _two_levels(data: dict) -> str:
    """JSON with one line per key of the top two levels: short, and a reviewer sees each
    op list on a line of its own."""

    def inner(value):
        if not isinstance(value, dict):
            return json.dumps(value)
        rows = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(rows) + "}"

    return "{" + ",\n ".join(f"{json.dumps(k)}: {inner(v)}" for k, v in sorted(data.items())) + "}"
