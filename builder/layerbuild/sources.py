"""Before a build writes anything: can the layers it will build get what they start from and
fetch (check_inputs: the arch's QEMU and compilers, torch's index, the locked files, and here:
do the base images' registries and the git servers answer from this host)?

A layer that starts from a docker image pulls it from its registry, and a kept step that
compiles a pinned source fetches it with git (render.git_sources). Either failing shows late,
in Apptainer's or git's words, after minutes of a build. So the build asks each registry
(`https://<registry>/v2/`, where a 401 is an answer) and each git URL
(`<url>/info/refs?service=git-upload-pack`) once per process, with the pip indexes' check
(pip_indexes.why_down), and stops at the first that does not answer, in one line.

The site's own image, which a site-image target starts from, is checked first: a file this
build can read.
"""

import os
from pathlib import Path

from ..errors import RecipeError, ToolError
from ..host import cross_tools, emulation, hostinfo, pip_indexes, torch_source
from ..recipes.target_parts import repository_name
from . import drift

DOCKER_HUB = "registry-1.docker.io"  # the registry of a reference that names none


def check_inputs(tree, target, plans, planned, indexes_down, progress, bundle=None):
    """What the layers to build start from and fetch, before anything is written or pulled;
    returns the x86-64 compilers for an image of another arch (host.cross_tools), or None.
    A bundle was checked already: no source is asked."""
    cross = None
    if planned:  # an image of another architecture: made for it, QEMU ready (a newer one, as root)
        emulation.check_build(target)
        cross = cross_tools.prepare(target, progress)
    if bundle:
        return cross
    if "devel" in planned:  # the devel layer installs torch
        torch_source.check(tree.target(plans["devel"].owner).torch, indexes_down)
    check([plans[layer] for layer in planned], target.name)  # base images' registries, git sources
    if planned:  # every file the lock names is still served: else one line now, not a hash error later
        drift.check(target, indexes_down)
        drift.check_debian(tree, plans, planned, progress)
    return cross


def check(plans, target_name):
    """Raise ToolError for the first registry, then the first git URL, of ``plans`` (the
    LayerPlans the build will build, in order) that does not answer. ``target_name``: the
    target being built, named in the error."""
    cafile = hostinfo.pip_settings()["cert"]
    for plan in plans:
        for image in plan.base_images:
            host = registry(image)
            why = pip_indexes.why_down(f"https://{host}/v2/", cafile)
            if why:
                raise ToolError(
                    f"{host} does not answer ({why}): {_needed_by(plan, target_name)} starts from "
                    f"docker://{image}; build where the registry answers, or pull that image where "
                    "it does (apptainer pull) and give the target's stage `bootstrap: localimage` "
                    "with the .sif as its image, or set up a registry mirror"
                )
    for plan in plans:
        for url in plan.git_sources:
            why = pip_indexes.why_down(f"{url.rstrip('/')}/info/refs?service=git-upload-pack", cafile)
            if why:
                raise ToolError(
                    f"{url} does not answer ({why}): {_needed_by(plan, target_name)} fetches "
                    f"{repository_name(url)}'s pinned commit from it; build where it answers, or point that "
                    "source's git: in recipes/versions.yaml at a mirror of it holding the same commit"
                )


def registry(image: str) -> str:
    """The registry host of a docker reference: its first path component when that names a
    host ("." or ":" in it, or localhost), else Docker Hub's.
    registry("rocm/dev-ubuntu-24.04:7.0.2") -> "registry-1.docker.io";
    registry("ghcr.io/org/image:tag") -> "ghcr.io"."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return DOCKER_HUB


def _needed_by(plan, target_name) -> str:
    shared = "" if plan.owner == target_name else f", which {target_name} builds on,"
    return f"the {plan.layer} layer of {plan.owner}{shared}"


def check_site_image(image):
    """The site's image is a file this build can read; one line naming the site file's key
    when it is not (exit 2: the site file names it)."""
    path = Path(image.path)
    if not path.exists():
        why = "no such file here"
    elif not path.is_file():
        why = "not a file"
    elif not os.access(path, os.R_OK):
        why = "not readable by this user"
    else:
        return
    raise RecipeError(
        f"{path}: {why}; expected the site's own image file (build on the site, or point "
        "site_image.path at a copy of it)",
        file=image.origin[0],
        line=image.origin[1],
        path=("site_image", "path"),
    )
