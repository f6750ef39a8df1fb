"""The CUDA images built for real, without a GPU: heavy, so only on request.

    make test-heavy                       # every CUDA target (hours on 2 cores)
    make test-heavy HEAVY=a100-cuda       # one of them (pytest -m heavy -k a100-cuda)

Each build runs the image's own %test (torch's arch list, every promised op [YES] in ds_report
and loading prebuilt, each op's code for every arch of the image, the preflight). Here the
built image is asked again from outside: its labels, `list`, the preflight's verdicts, and
the op archs as the smoke suite's fatbin reader sees them against NVIDIA's cuobjdump.
"""

import json
import os
import re
import subprocess
import sys
import time

import pytest
from conftest import ROOT, run_builder
from helpers import x86_code

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import fatbin  # noqa: E402

pytestmark = pytest.mark.heavy

# target: (the CUDA release of its torch, the driver that needs, the archs of its ops)
CUDA_TARGETS = {
    "v100-cuda": ("12.8", "525.60.13", ("sm_70",)),
    "a100-cuda": ("13.2", "580.65.06", ("sm_80",)),
    "h100-cuda": ("13.2", "580.65.06", ("sm_90",)),
    "csc-cuda": ("12.8", "525.60.13", ("sm_70", "sm_80")),
    # aarch64, built and examined here under QEMU (issue 34)
    "gh200-cuda": ("13.2", "580.65.06", ("sm_90",)),
}
CUOBJDUMP = "nvidia-cuda-cuobjdump==13.2.86"  # reads CUDA 12 and 13 objects alike


@pytest.fixture(scope="module", params=sorted(CUDA_TARGETS))
def built(request, tmp_path_factory):
    name = request.param
    images = tmp_path_factory.mktemp(f"images-{name}")
    started = time.monotonic()
    result = run_builder("build", name, "--images", images, timeout=6 * 3600)
    assert result.returncode == 0, result.stderr[-4000:]
    print(f"\n{name}: built in {time.monotonic() - started:.0f} s\n{result.stderr}", file=sys.stderr)
    return name, images


def run_in(apptainer, image, *argv):
    # gh200-cuda's preflight runs emulated here, as asked (a no-op for the x86-64 images)
    env = dict(os.environ, APPTAINERENV_HPCML_ALLOW_EMULATION="1")
    return subprocess.run([apptainer, "exec", str(image), *argv], capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def apptainer(tree):
    from builder.host.which_apptainer import ready_apptainer

    return ready_apptainer(tree.target("cpu").sites[0])


def test_labels_record_nccl_cuda_and_the_oldest_driver(built, apptainer):
    name, images = built
    cuda, driver, _ = CUDA_TARGETS[name]
    result = subprocess.run(
        [apptainer, "inspect", "--json", "--labels", str(images / f"{name}.sif")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    labels = json.loads(result.stdout)["data"]["attributes"]["labels"]
    prefix = "org.hpc-ml-containers."
    assert labels[prefix + "cuda.runtime"] == cuda
    assert labels[prefix + "cuda.min_driver"] == driver
    assert re.fullmatch(r"2\.\d+\.\d+", labels[prefix + "nccl.version"])
    listed = run_builder("list", "--images", images)
    line = next(line for line in listed.stdout.splitlines() if "built:" in line)
    assert f"cuda.runtime {cuda}" in line and f"cuda.min_driver {driver}" in line, listed.stdout
    shown = run_builder("show", name, "--images", images)
    assert f"cuda.min_driver: {driver}" in shown.stdout.replace("'", "")


def test_the_preflight_passes_the_image_side_checks_and_waits_for_a_gpu(built, apptainer):
    name, images = built
    result = run_in(apptainer, images / f"{name}.sif", "python", "-m", "smoke", "preflight")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split("  ")[0]: line for line in result.stdout.splitlines()}
    for check in ("preflight torch", "preflight image torch archs", "preflight image op archs"):
        assert "PASS" in rows[check], result.stdout
    assert "NONE" in rows["preflight gpu"]
    if name == "gh200-cuda":  # issue 34: emulated, as the opt-in asks
        assert "PASS" in rows["preflight cpu arch"] and "runs emulated on an x86_64 node" in rows["preflight cpu arch"]
        uname = run_in(apptainer, images / f"{name}.sif", "uname", "-m")
        assert uname.stdout == "aarch64\n", uname.stderr


def test_each_op_holds_code_for_the_images_archs_as_cuobjdump_sees_it(built, apptainer, tmp_path):
    name, images = built
    archs = CUDA_TARGETS[name][2]
    image = images / f"{name}.sif"
    listing = run_in(apptainer, image, "sh", "-c", "find /opt/venv/lib/python3*/site-packages/deepspeed -name '*.so'")
    libraries = listing.stdout.split()
    assert libraries, listing.stderr
    tools = tmp_path / "tools"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(tools), CUOBJDUMP],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr
    cuobjdump = next(tools.rglob("bin/cuobjdump"))
    cuobjdump.chmod(0o755)
    with_code = 0
    for library in libraries:
        local = tmp_path / library.rsplit("/", 1)[1]
        local.write_bytes(
            subprocess.run(
                [apptainer, "exec", str(image), "cat", library], capture_output=True, timeout=120, check=True
            ).stdout
        )
        ours = set(fatbin.archs(local))
        elf = subprocess.run([str(cuobjdump), "--list-elf", str(local)], capture_output=True, text=True)
        theirs = set(re.findall(r"\.(sm_\d+[a-z]?)\.cubin", elf.stdout))
        assert {a for a in ours if a.startswith("sm_")} == theirs, (library, ours, elf.stdout)
        if theirs:
            with_code += 1
            # exactly the image's: more would be a wheel kept from another image's build
            assert theirs == set(archs), (library, theirs)
    # the CUDA ops (inference_core_ops and ragged_ops live in deepspeed/inference/v2), not
    # only the CPU ones
    assert with_code >= 11, libraries


def test_the_ops_cpu_code_runs_on_every_node_of_the_images_sites(built, apptainer, tmp_path):
    """x86-64 images: no op uses AVX-512, which this build host has and AMD Zen 3 (LUMI's
    EPYC 7A53) has not; gh200-cuda: every op is aarch64 code, cross compiled or not."""
    name, images = built
    ops = x86_code.copy_ops(apptainer, images / f"{name}.sif", tmp_path)
    assert len(ops) >= 11, ops
    if name == "gh200-cuda":
        machines = {op.name: int.from_bytes(op.read_bytes()[18:20], "little") for op in ops}
        assert set(machines.values()) == {0xB7}, machines  # EM_AARCH64
        return
    assert x86_code.unguarded_avx512(ops) == {}
