"""Which GPU archs code built for a list of archs runs on, and the verdicts preflight gives
from that: NVIDIA machine code runs on the same major and a newer minor, PTX on any newer arch
(compiled at first use); AMD code only on its own arch. Apart from preflight because the rules
are the GPU vendors', not the node's.

Example: runs_on("sm_86", ("sm_80",)) -> "native"; runs_on("sm_90", ("compute_80",)) -> "ptx"
"""

from .verdict import Verdict


def runs_on(gpu_arch, archs) -> str:
    """How code built for ``archs`` runs on ``gpu_arch``: "native", "ptx" (JIT-compiled at first
    use from PTX) or "" (it does not). NVIDIA machine code runs on the same major and a newer
    minor (sm_80 code on sm_86); PTX on any newer arch. AMD code runs on its exact arch."""
    if gpu_arch in archs:
        return "native"
    if not gpu_arch.startswith("sm_"):
        return ""
    gpu = _capability(gpu_arch)
    if any(a.startswith("sm_") and _capability(a)[0] == gpu[0] and _capability(a) <= gpu for a in archs):
        return "native"
    if any(a.startswith("compute_") and _capability(a) <= gpu for a in archs):
        return "ptx"
    return ""


def _capability(arch):
    digits = arch.split("_", 1)[1].rstrip("af")  # sm_90a, sm_100f: the same family
    return int(digits[:-1]), int(digits[-1])


def holds_code_for(archs, holders, what):
    """Every arch the image promises has machine code in each holder ((name, archs), ...)."""
    short = {}
    for name, held in holders:
        lacking = [arch for arch in archs if runs_on(arch, held) != "native"]
        if lacking:
            short[name] = (lacking, held)
    if short:
        name, (lacking, held) = next(iter(sorted(short.items())))
        more = f" (and {len(short) - 1} more)" if len(short) > 1 else ""
        return Verdict.failed(
            f"{name}{more} has no code for {', '.join(lacking)} "
            f"(holds {', '.join(held) or 'none'}): the image does not "
            f"keep its promise; rebuild it with a {what} build for those archs"
        )
    return Verdict.passed(
        f"{what} holds code for {', '.join(archs)}" + (f" ({len(holders)} files)" if len(holders) > 1 else "")
    )


def runs_on_gpus(gpus, archs, what, advice):
    """Code built for ``archs`` runs on each of this node's GPUs ((name, arch), ...); else a
    failure naming the first GPU it does not run on, with ``advice`` ({arch} filled in)."""
    seen = {}
    for name, arch in gpus:
        seen.setdefault(arch, name)
    slow = []
    for arch, name in sorted(seen.items()):
        how = runs_on(arch, archs)
        if not how:
            held = ", ".join(archs) or "none"
            return Verdict.failed(
                f"{name} ({arch}): {what} has no code for it (holds {held}); {advice.format(arch=arch)}"
            )
        if how == "ptx":
            slow.append(arch)
    note = f"; {', '.join(slow)} through PTX, compiled at first use" if slow else ""
    return Verdict.passed(f"{what} runs on {', '.join(sorted(seen))} ({len(gpus)} GPU(s)){note}")
