"""Does this node's amdgpu kernel driver run the image's ROCm? AMD's answer, not a guess.

The node's driver is read as its module names itself (/sys/module/amdgpu/version): a release
of 30.10 or later by its own number (30.10.1), an older one by the kernel it was ported from
(6.10.5 is release 6.3), which the image's table maps, and a packaged form such as LUMI's
6.3.60300 by the ROCm digits at its end. The image carries AMD's support matrix (release ->
the ROCm user space it runs; recipes/versions.yaml amdgpu_runs); torch says which ROCm the
image is (torch.version.hip, 7.0.51831 is 7.0). Standard library only.

Example: verdict("6.10.5", "7.2.41133", image.gpu) fails: release 6.3 runs ROCm 6.1 to 7.0.
"""

import re

from .verdict import Verdict

WHERE = "/sys/module/amdgpu/version"


def release(version: str, modules: dict) -> str:
    """The amdgpu release a module version is ("6.3", "30.10"), or "" when it cannot be told."""
    if version in modules:
        return modules[version]
    parts = version.split(".")
    packaged = [part for part in parts[1:] if re.fullmatch(r"[1-9][0-9]{4}", part)]
    if packaged:  # 6.3.60300 or 6.10.5.60300: ROCm 6.3's digits
        digits = int(packaged[-1])
        return f"{digits // 10000}.{digits // 100 % 100}"
    if len(parts) >= 2 and parts[0].isdigit() and int(parts[0]) >= 30:  # 30.10.1: named by itself
        return f"{parts[0]}.{parts[1]}"
    return ""


def rocm_of(hip: str) -> str:
    """The ROCm release of torch's HIP version (7.0.51831 -> 7.0)."""
    return ".".join(hip.split(".")[:2]) if hip else ""


def verdict(version, hip, gpu) -> Verdict:
    """``version``: the module's version (None: unreadable); ``hip``: torch's; ``gpu``: the
    image's GpuPromise, whose amdgpu_runs and amdgpu_modules hold AMD's matrix."""
    if not version:
        return Verdict.none(f"no amdgpu version in {WHERE}: the driver's release is unknown here; ask the admins")
    rocm = rocm_of(hip)
    if not rocm:
        return Verdict.none(f"amdgpu {version}; torch names no HIP version to judge it by")
    found = release(version, gpu.amdgpu_modules)
    runs = gpu.amdgpu_runs.get(found)
    if not runs:
        return Verdict.none(
            f"amdgpu {version} (release {found or 'unknown'}) is not in the image's copy of AMD's matrix; "
            f"it cannot say whether it runs ROCm {rocm}"
        )
    if rocm not in runs:
        return Verdict.failed(
            f"amdgpu {version} (release {found}) runs ROCm {runs[0]} to {runs[-1]}, not this image's ROCm "
            f"{rocm} (AMD's support matrix): use an image of ROCm {runs[-1]} or older, or ask the admins "
            f"for a driver that runs {rocm}"
        )
    return Verdict.passed(f"amdgpu {version} (release {found}) runs ROCm {rocm} (AMD's support matrix)")
