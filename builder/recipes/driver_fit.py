"""Does a site's GPU driver run a target's torch? The site's own word (gpu.driver in its file)
against the target's CUDA or ROCm release (torch.runtime, a site image's runtime).

NVIDIA: the site's driver must be at least the oldest one the target's CUDA major runs on
(versions.yaml cuda_min_driver). AMD: the target's ROCm must lie in the range the site says its
amdgpu runs. A site that records no driver, or a target that names no release, is not judged:
the smoke preflight on a node reads the driver there.

Example: misfit(lumi_laif72, lumi) == "lumi-laif72's ROCm 7.2 is outside what lumi's GPU
driver runs: amdgpu 6.3.60300 runs ROCm 6.1 to 7.0 (https://..., read 2026-12-02)"
"""

from ..errors import RecipeError


def _release(text: str) -> tuple:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def misfit(target, site) -> str:
    """One line saying why ``site``'s recorded driver cannot run ``target``; "" when it can or
    when either side does not say."""
    driver, runtime = site.gpu.driver, target.torch.runtime
    if driver is None or not runtime:
        return ""
    said = f"({driver.source}, read {driver.read})"
    if target.torch.flavour == "rocm":
        oldest, newest = driver.rocm
        if _release(oldest) <= _release(runtime) <= _release(newest):
            return ""
        return (
            f"{target.name}'s ROCm {runtime} is outside what {site.name}'s GPU driver runs: "
            f"amdgpu {driver.version} runs ROCm {oldest} to {newest} {said}"
        )
    needed = dict(target.cuda_min_driver).get(runtime.split(".")[0])
    if needed and _release(driver.version) < _release(needed):
        return (
            f"{target.name}'s CUDA {runtime} needs an NVIDIA driver of {needed} or newer; "
            f"{site.name} runs {driver.version} {said}"
        )
    return ""


def fitting(tree, site) -> list:
    """The targets for ``site`` whose torch its recorded driver runs, by name."""
    return sorted(
        name
        for name, target in tree.targets.items()
        if site.name in {s.name for s in target.sites} and target.torch.runtime and not misfit(target, site)
    )


def refusal(tree, target, site) -> str:
    """The one line that stops an image for ``site`` its driver cannot run ("" when it can):
    why, and which targets to take instead."""
    why = misfit(target, site)
    if not why:
        return ""
    others = fitting(tree, site)
    instead = f"use {' or '.join(others)}" if others else f"no target for {site.name} fits its driver"
    return (
        f"{why}; {instead}, or, if the driver has moved, record it in {site.name}'s site file "
        f"(gpu.driver) with its source"
    )


def require(tree, target, site):
    """Stop, in one line, an image for ``site`` that its recorded driver cannot run."""
    refused = refusal(tree, target, site)
    if refused:
        raise RecipeError(refused)
