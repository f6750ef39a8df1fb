"""The run's results: a table like nccl-tests' for the terminal, a JSON report, a PNG plot.

smoke.json is json.dumps of the SmokeReport (ASCII: every other character escaped), which the
builder reads back with the same record (hpcml_facts.SmokeReport.from_json, in publish and
verify), so each value reads back as it was. The terminal's lines give each check one line:
a character that would not print as itself (a newline in an error, a NUL) is escaped there.
"""

import json
import os
import platform
import tempfile
import time
from pathlib import Path

from hpcml_facts import Machine, SmokeReport
from launchenv import one_line

from .sizes import human
from .verdict import ERROR, FAIL, NONE, PASS

LABELS = Path("/.singularity.d/labels.json")
LABEL_PREFIX = "org.hpc-ml-containers."


def table(rows, world):
    lines = [
        f"# all-reduce, {world} ranks, in place; time is the slowest rank's",
        f"#{'size':>12} {'count':>12} {'type':>9} {'time(us)':>11} {'algbw(GB/s)':>12} "
        f"{'busbw(GB/s)':>12} {'#wrong':>7}",
    ]
    for row in rows:
        lines.append(
            f" {row['bytes']:>12} {row['count']:>12} {one_line(row['dtype']):>9} {row['time_us']:>11.1f} "
            f"{row['algbw_gbs']:>12.3f} {row['busbw_gbs']:>12.3f} {row['wrong']:>7}"
        )
    return "\n".join(lines)


def verdict_lines(checks):
    """A line per check: its name, verdict and why, each kept on the line."""
    names = {name: one_line(name) for name in checks}
    width = max(map(len, names.values()), default=0)
    return "\n".join(
        f"{names[name]:<{width}}  {one_line(result.verdict.upper()):<12} {one_line(result.why)}"
        for name, result in checks.items()
    )


def overall(checks):
    verdicts = {result.verdict for result in checks.values()}
    if verdicts & {FAIL, ERROR}:
        return FAIL
    return PASS if PASS in verdicts else NONE


def image_labels():
    """The image's provenance labels (without the embedded recipe, which is long)."""
    try:
        labels = json.loads(LABELS.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(labels, dict):
        return {}
    return {
        key[len(LABEL_PREFIX) :]: value
        for key, value in sorted(labels.items())
        if key.startswith(LABEL_PREFIX) and key != LABEL_PREFIX + "recipe"
    }


def versions():
    found = {"python": platform.python_version()}
    for module in ("torch", "deepspeed", "numpy", "mpi4py", "matplotlib"):
        try:
            found[module] = str(__import__(module).__version__)  # text, as the report's reader takes it
        except Exception:  # absent or broken: the report says so rather than failing
            found[module] = None
    try:
        import torch

        found["cuda"], found["hip"] = torch.version.cuda, getattr(torch.version, "hip", None)
        if torch.cuda.is_available():
            found["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
            found["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        pass
    return found


def document(session, site_name, args, checks, rows) -> SmokeReport:
    machine = Machine(
        hosts=tuple(sorted(set(session.hosts))),
        nodes=session.nodes,
        ranks=session.world,
        ranks_per_node=session.local_world,
        launcher=session.launch.source if session.launch else None,
        backend=session.backend,
        device=session.device,
        cpus=os.cpu_count(),
        kernel=platform.release(),
        site=site_name,
    )
    return SmokeReport(
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        command=tuple(args),
        machine=machine,
        image=image_labels(),
        versions=versions(),
        allreduce=tuple(rows),
        checks=dict(checks),
        verdict=overall(checks),
    )


def write_json(path, report: SmokeReport):
    _atomic(path, (json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n").encode())


def plot(path, rows, threshold, title):
    """busbw against message size per dtype, with the site's reference and floor drawn."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 4.5))
    for dtype in sorted({row["dtype"] for row in rows}):
        mine = [row for row in rows if row["dtype"] == dtype]
        axes.plot([r["bytes"] for r in mine], [r["busbw_gbs"] for r in mine], marker="o", label=f"busbw {dtype}")
    if threshold:
        floor = threshold["busbw_gbs"] * (1 - threshold.get("tolerance", 0.05))
        axes.axhline(
            floor,
            color="red",
            linestyle="--",
            label=f"site floor {floor:.1f} GB/s at {human(threshold['bytes'])}iB "
            f"({threshold.get('dtype', 'float32')}, {threshold['nodes']} node(s))",
        )
        axes.axvline(threshold["bytes"], color="red", linestyle=":", linewidth=0.8)
    axes.set_xscale("log", base=2)
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel("bus bandwidth (GB/s)")
    axes.set_title(title)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    with tempfile.NamedTemporaryFile(dir=Path(path).parent, suffix=".png", delete=False) as handle:
        figure.savefig(handle, format="png", metadata={"Software": None})
    pyplot.close(figure)
    os.chmod(handle.name, 0o644)
    os.replace(handle.name, path)


def _atomic(path, data):
    path = Path(path)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name + ".", delete=False) as handle:
        handle.write(data)
    os.chmod(handle.name, 0o644)
    os.replace(handle.name, path)
