"""Preflight: does this node's GPU and driver suit the image? Asked before any collective.

Each check gives one verdict; a failing one says in one line what is wrong and what to do.
Only this node is read: the NVIDIA driver's version from /proc (visible in a container even
without --nv; AMD: the amdgpu module's from /sys, which amd_driver judges), each GPU's compute
capability from nvidia-smi (AMD: the kfd topology in /sys), and the arch list torch was
compiled with, which needs no GPU. CUDA is never initialised, so a driver too old for the
image is reported instead of crashing the first collective.

The image's side comes from image.json: the archs it was built for (its sites' GPUs; the
DeepSpeed ops were compiled for the same list) and the minimum driver per CUDA major. Two
checks need no GPU and so also run in the image's %test: torch's arch list and the code in
each compiled DeepSpeed op (read from its .nv_fatbin) cover every arch the image promises.
Which arch runs which code is smoke/archs.py's to say.
"""

import os
import platform
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import hpcml_contract as contract
from hpcml_facts import ImageFacts, SiteFacts

from . import amd_driver, commands, contents, fatbin, netcheck
from .archs import holds_code_for, runs_on_gpus
from .verdict import FAIL, Verdict

NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")
AMDGPU_VERSION = Path("/sys/module/amdgpu/version")  # the kernel module's, visible in a container
KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")
KERNEL_ARCH = Path("/proc/sys/kernel/arch")


@dataclass(frozen=True)
class Host:
    """What this node offers; tests build one by hand to simulate any GPU and driver."""

    driver: str = None  # NVIDIA driver version, e.g. "550.54.15"; None: none loaded
    gpus: tuple = ()  # ((name, arch), ...): ("NVIDIA A100-SXM4-40GB", "sm_80"), gfx90a
    gpu_error: str = None  # why the GPUs could not be listed although a driver is there
    torch: str = None  # torch's version; None: it does not import
    torch_cuda: str = None  # CUDA runtime torch was built with ("12.8"); None: not CUDA
    torch_hip: str = None
    torch_archs: tuple = ()  # ("sm_70", "sm_80", "compute_90") or ("gfx90a",)
    op_archs: tuple = ()  # (("fused_adam_op", ("sm_80",)), ...): DeepSpeed ops with CUDA code
    machine: str = ""  # the image's CPU architecture, as its programs see it (uname -m)
    kernel_arch: str = ""  # the node's, from its kernel ("" when unreadable): differs under QEMU
    allow_emulation: bool = False  # HPCML_ALLOW_EMULATION=1: the user runs it emulated on purpose
    amdgpu: str = None  # the amdgpu module's version ("6.10.5"); None: not readable


def probe(timeout=30) -> Host:
    driver = None
    if NVIDIA_DRIVER.is_file():
        match = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+(?:\.\d+)+)", NVIDIA_DRIVER.read_text())
        driver = match.group(1) if match else None
    gpus, error = (), None
    if driver:
        gpus, error = _nvidia_gpus(timeout)
    elif KFD_NODES.is_dir():
        gpus = _amd_gpus()
    version = cuda = hip = None
    archs = ()
    try:
        import torch

        version, cuda, hip = torch.__version__, torch.version.cuda, getattr(torch.version, "hip", None)
        flags = getattr(torch._C, "_cuda_getArchFlags", lambda: "")()  # no CUDA initialisation
        archs = tuple(flags.split()) if flags else ()
    except ImportError:
        pass
    return Host(
        driver,
        gpus,
        error,
        version,
        cuda,
        hip,
        archs,
        deepspeed_op_archs(),
        platform.machine(),
        _kernel_arch(),
        os.environ.get(contract.ALLOW_EMULATION) == "1",
        _read(AMDGPU_VERSION) or None,
    )


def _kernel_arch() -> str:
    """The node's own architecture: QEMU's user-mode emulator answers uname with the image's,
    but the kernel's sysctl is read from the kernel."""
    return _read(KERNEL_ARCH)


def _read(path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def deepspeed_op_archs() -> tuple:
    """(op file's name, its archs) for each compiled DeepSpeed op that holds CUDA code; found
    by path (contents.op_libraries, the SBOM's list too), so DeepSpeed is not imported."""
    found = []
    for library in contents.op_libraries():  # deepspeed/ops/ and deepspeed/inference/v2/
        try:
            archs = fatbin.archs(library)
        except (OSError, fatbin.NotELF):
            continue
        if archs:
            found.append((contents.op_name(library), archs))
    return tuple(found)


def _nvidia_gpus(timeout):
    if not shutil.which("nvidia-smi"):
        return (), "nvidia-smi is not in the container: start it with --nv (the wrapper does on GPU sites)"
    try:
        out = commands.run(["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"], timeout)
    except OSError as error:
        return (), f"nvidia-smi failed: {error}"
    if out.timed_out:
        return (), f"nvidia-smi {out.late}"
    if out.returncode != 0:
        return (), f"nvidia-smi failed: {(out.stdout + out.stderr).strip().splitlines()[-1:]}"
    gpus = []
    for line in out.stdout.strip().splitlines():
        name, _, cap = line.rpartition(",")
        gpus.append((name.strip(), "sm_" + cap.strip().replace(".", "")))
    return tuple(gpus), None


def _amd_gpus():
    gpus = []
    for properties in sorted(KFD_NODES.glob("*/properties")):
        match = re.search(r"^gfx_target_version (\d+)$", properties.read_text(), re.M)
        if match and int(match.group(1)):
            version = int(match.group(1))  # 90010 -> gfx90a
            major, minor, step = version // 10000, version // 100 % 100, version % 100
            gpus.append((f"AMD GPU (kfd node {properties.parent.name})", f"gfx{major}{minor}{step:x}"))
    return tuple(gpus)


def _version(text):
    return tuple(int(part) for part in re.findall(r"\d+", text))


def network(facts: ImageFacts, site: SiteFacts, nodes: int, run=netcheck.run) -> dict:
    """The image's network plugin, checked on this node as this job will use it: it loads
    with every symbol resolved against the image's RCCL and the libfabric the site chose
    (the host's, bound in on multi-node jobs, or the image's own), and that libfabric's
    provider finds the node's device (fi_info -p cxi where a CXI device is present)."""
    comm = facts.comm
    if comm is None or not comm.plugin_path:
        return {}
    libfabric_dir = comm.libfabric_dir
    chosen = site.network
    if nodes > 1 and chosen.libfabric == "host" and chosen.host_library_path:
        libfabric_dir = chosen.host_library_path[0]
    results = {}
    checks = [
        (
            "preflight net plugin",
            "plugin",
            ["--plugin", comm.plugin_path, "--rccl", comm.rccl, "--libfabric-dir", libfabric_dir],
        )
    ]
    if comm.provider:
        checks.append(
            (
                "preflight net provider",
                "provider",
                ["--libfabric", f"{libfabric_dir}/libfabric.so.1", "--provider", comm.provider],
            )
        )
    for name, check, argv in checks:
        passed, line = run(check, argv)
        results[name] = Verdict.judged(passed, line.split(": ok: ", 1)[-1].split(": FAIL: ", 1)[-1])
    return results


def check(host: Host, facts: ImageFacts) -> dict:
    """{check name: Verdict} for this node against the image's promises."""
    if facts.target is None:
        return {"preflight": Verdict.none("not inside an image: nothing promised to check this node against")}
    archs = list(facts.gpu.archs) if facts.gpu else []
    results = {"preflight cpu arch": _cpu_arch(host), "preflight torch": _torch_build(host, archs)}
    if not archs:
        results["preflight gpu"] = Verdict.passed("a CPU image: no GPU to check")
        return results
    if archs[0].startswith("sm_"):
        results["preflight image torch archs"] = holds_code_for(archs, [("torch", host.torch_archs)], "torch")
        results["preflight image op archs"] = _ops_built_for(archs, host.op_archs, facts)
    if not host.gpus and not host.gpu_error:
        results["preflight gpu"] = Verdict.none(
            "no GPU on this node: the driver and arch checks run on a GPU node (python -m smoke preflight in a GPU job)"
        )
        return results
    if archs[0].startswith("sm_"):
        results["preflight driver"] = _driver(host, facts.gpu.min_driver)
    else:
        results["preflight driver"] = amd_driver.verdict(host.amdgpu, host.torch_hip, facts.gpu)
    if host.gpu_error:
        results["preflight gpu"] = Verdict.failed(host.gpu_error)
        return results
    results["preflight gpu arch"] = runs_on_gpus(
        host.gpus,
        archs,
        "the image (and its DeepSpeed ops)",
        "use the image built for {arch}, or rebuild this one with {arch} in its sites' GPU archs",
    )
    results["preflight torch archs"] = runs_on_gpus(
        host.gpus,
        host.torch_archs,
        "torch",
        "rebuild with a torch build that carries {arch} (recipes: the target's torch.version)",
    )
    for op, op_archs in host.op_archs:
        verdict = runs_on_gpus(
            host.gpus, op_archs, f"DeepSpeed's {op}", "rebuild the image with {arch} in its sites' GPU archs"
        )
        if verdict.verdict == FAIL:
            results["preflight op archs"] = verdict
            break
    else:
        if host.op_archs:
            results["preflight op archs"] = Verdict.passed(
                f"all {len(host.op_archs)} CUDA ops of DeepSpeed run on "
                f"{', '.join(sorted({arch for _, arch in host.gpus}))}"
            )
    return results


def _ops_built_for(archs, op_archs, facts):
    ds = facts.deepspeed
    if not op_archs:
        if ds.accelerator == "cuda" and ds.promised_ops:
            return Verdict.failed(
                "no compiled DeepSpeed op holds CUDA code, but the image "
                "promises CUDA ops: rebuild it (DS_ACCELERATOR=cuda)"
            )
        return Verdict.none("no DeepSpeed op with CUDA code here")
    return holds_code_for(archs, op_archs, "DeepSpeed op")


def _cpu_arch(host):
    if not host.kernel_arch or host.kernel_arch == host.machine:
        return Verdict.passed(f"{host.machine} image on an {host.machine} node")
    emulated = f"this {host.machine} image runs emulated on an {host.kernel_arch} node"
    if host.allow_emulation:
        return Verdict.passed(f"{emulated}, as {contract.ALLOW_EMULATION}=1 asks")
    return Verdict.failed(
        f"{emulated}, many times slower: run it on an {host.machine} node ({contract.ALLOW_EMULATION}=1 to go on)"
    )


def _torch_build(host, archs):
    if host.torch is None:
        return Verdict.failed(
            "torch does not import here: run inside the image (singularity_wrapper exec python -m smoke preflight)"
        )
    wanted = "cuda" if archs and archs[0].startswith("sm_") else "rocm" if archs else "cpu"
    found = "cuda" if host.torch_cuda else "rocm" if host.torch_hip else "cpu"
    if found != wanted:
        return Verdict.failed(f"torch is a {found} build where the image promises {wanted}: rebuild the image")
    detail = f" (CUDA {host.torch_cuda})" if host.torch_cuda else f" (HIP {host.torch_hip})" if host.torch_hip else ""
    return Verdict.passed(f"torch {host.torch}, a {found} build as promised{detail}")


def _driver(host, minimums):
    major = (host.torch_cuda or "").split(".")[0]
    needed = minimums.get(major)
    if not host.driver:
        return Verdict.failed(f"GPUs but no NVIDIA driver version in {NVIDIA_DRIVER}: ask the site's admins")
    if not needed:
        return Verdict.none(f"driver {host.driver}; the image names no minimum for CUDA {host.torch_cuda}")
    if _version(host.driver) < _version(needed):
        return Verdict.failed(
            f"driver {host.driver} is older than {needed}, which "
            f"CUDA {host.torch_cuda} in this image needs: use an "
            f"image built for an older CUDA, or ask the admins "
            f"for a newer driver"
        )
    return Verdict.passed(f"driver {host.driver} >= {needed} (CUDA {host.torch_cuda})")
