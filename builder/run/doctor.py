"""`doctor`: what this host offers for building images, without changing anything."""

from pathlib import Path

from .. import runner
from ..errors import ToolError
from ..host import build_route, cross_tools, emulation, hostinfo, route_facts, space, toolbox
from ..host.cache import cache_dir
from ..recipes.site_model import Site
from ..recipes.tree import RecipeTree
from . import build_job


def report(tree: RecipeTree | None, images, recipes=""):
    """``tree`` None (no recipes): Apptainer is looked up without a site's path; ``recipes``: its folder, and why."""
    rows = []
    site: Site | None = None
    if tree is not None:
        site = tree.targets["cpu"].sites[0] if "cpu" in tree.targets else next(iter(tree.sites.values()), None)
        rows += [("recipes", recipes)] if recipes else []
    else:
        rows.append(("recipes", "none here (no recipe tree found): host facts only"))
    apptainer_rows, route, apptainer = _apptainer_rows(site)
    rows += apptainer_rows
    rows += _build_job_rows(tree, route, apptainer)
    rows.append(("fakeroot", route.fakeroot_row()))
    for arch in _other_archs(tree):
        rows.append((f"emulation {arch}", emulation.state(arch)[1]))
        rows.append((f"compilers {arch}", cross_tools.state(arch)))
    where = space.folders(Path(images))
    for label, path in (
        ("disk images", where.images),
        ("disk tmp", where.tmp),
        ("disk cache", cache_dir()),
        ("disk apptainer cache", where.apptainer_cache),
    ):
        there = space.existing(path)
        rows.append(
            (
                label,
                f"{space.free_bytes(path) / 1e9:.1f} GB free at {there}" + ("" if there == path else f" (for {path})"),
            )
        )
    for label, mirror in (("mirror", hostinfo.debian_mirror), ("security mirror", hostinfo.security_mirror)):
        try:
            rows.append((label, mirror()))
        except ToolError as error:
            rows.append((label, str(error)))
    pip = hostinfo.pip_settings()
    rows.append(("pip CA", pip["cert"] or "none (builds use the image's own CA bundle)"))
    wheels = [w.name for d in pip["find_links"] for w in Path(d).glob("*.whl")]
    rows.append(("pip wheels", f"{len(wheels)} local wheel(s): {', '.join(wheels)}" if wheels else "none"))
    for label, value in rows:
        print(f"{label:<21} {value}")


def _apptainer_rows(site: Site | None) -> list:
    """The Apptainer a build would use, and the way this host lets it run (host.build_route),
    both from one reading of the host's facts: (rows, the route, the Apptainer command)."""
    facts = route_facts.facts(site)
    rows = []
    if facts.apptainer:
        rows.append(("apptainer", f"{facts.apptainer}: {_version(facts.apptainer)}"))
    elif facts.toolbox_ready:
        rows.append(("apptainer", f"toolbox {toolbox.home()}: {_version(str(toolbox.command()))}"))
    else:
        why = facts.toolbox_reason
        rows.append(
            (
                "apptainer",
                "none on PATH; "
                + (
                    f"cannot provision a toolbox: {why}"
                    if why
                    else "`build` provisions a toolbox under the cache (about 40 s, 300 MB)"
                ),
            )
        )
    route = build_route.decide(facts)
    rows.append(("build route", route.detail if route.name else f"none: {route.blocker}"))
    return rows, route, facts.apptainer


def _build_job_rows(tree, route, apptainer) -> list:
    """Where a login node with no privilege sends each site-image target's build: its site's
    Slurm job (run/build_job.py), with the memory worked out from the site's image."""
    if tree is None or not route.unprivileged:
        return []
    rows = []
    for target in tree.targets.values():
        found = build_job.advice(target, apptainer)
        if found:
            rows.append(("build job", f"{target.name}: {found.sbatch or 'unknown'}"))
            rows.append(("build memory", f"{target.name}: {found.memory}"))
    return rows


def _other_archs(tree) -> list:
    """The CPU architectures of the recipes' targets that this host's is not."""
    archs = {target.arch for target in tree.targets.values()} if tree is not None else set()
    return sorted(archs - {emulation.host_arch()})


def _version(path):
    try:
        return runner.run([path, "--version"], timeout=60).stdout.strip()
    except ToolError as error:
        return f"broken ({error})"
