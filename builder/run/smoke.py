"""`python -m builder smoke TARGET`: the image's smoke suite on this machine, through the
wrapper, under torchrun with one rank per GPU (two ranks on a machine without GPUs)."""

import os
from pathlib import Path

from .. import contract, resources, runner
from ..errors import CheckFailed
from ..fileio import sha256_file, write_atomic
from ..host import hostinfo, pyenv_file
from ..host.images import IMAGE_SUM, built_image, checked_labels, image_lock
from ..host.which_apptainer import ready_apptainer
from ..recipes.tree import RecipeTree
from ..render.sitefile import render_site

SITE_FILE = "site.sh"  # the site's settings as the recipes say now, beside the report
GRACE_S = 60  # beyond the suite's own timeout, before the whole run is stopped


def run(tree: RecipeTree, name: str, *, images: Path, out, ranks, timeout, site: str | None, extra, pyenv=None):
    """``site``: the name of the site whose settings the run takes (default: the target's first);
    ``pyenv``: a project env's file, bound for the run (SING_PYENV)."""
    built = built_image(tree, name, images, site)
    image = built.path
    apptainer = ready_apptainer(built.site)
    checked_labels(apptainer, built)  # before anything is written
    if pyenv:
        pyenv_file.check_for(Path(pyenv), built.target, "--pyenv")
    # one rank per GPU of the site's node, where this machine has GPUs; else two, on the CPU
    ranks = ranks or (built.site.gpu.per_node if hostinfo.has_gpus() else 0) or 2
    out = Path(out or images / f"{name}.smoke").resolve()
    out.mkdir(parents=True, exist_ok=True)
    binds = ",".join(filter(None, [str(out), os.environ.get("SING_BIND")]))
    # the wrapper reads this site's settings (and hands its references to the suite) from the
    # recipes as they are now, not from a rendered copy that may be stale or absent
    write_atomic(out / SITE_FILE, render_site(built.site))
    env = {
        **os.environ,
        "SING_IMAGE": str(image.resolve()),
        contract.SITE: built.site.name,
        contract.SITE_FILE: str(out / SITE_FILE),
        contract.APPTAINER: apptainer,
        "SING_BIND": binds,
        **({"SING_PYENV": str(Path(pyenv).resolve())} if pyenv else {}),
    }
    argv = [
        str(resources.wrapper()),
        "exec",
        "torchrun",
        "--standalone",
        f"--nproc-per-node={ranks}",
        "-m",
        "smoke",
        "all",
        "--out",
        str(out),
        "--timeout",
        f"{timeout:g}",
        *extra,
    ]
    # The report must name the image it tested, so that publish can refuse a report of
    # another build: the checksum is taken before the run, written only beside a new report;
    # the lock keeps a build from replacing the image in between.
    with image_lock(images, built.target.name, shared=True):
        for stale in (out / contract.SMOKE_REPORT, out / IMAGE_SUM):
            stale.unlink(missing_ok=True)
        checksum = sha256_file(image)
        status = runner.run_attached(argv, env=env, timeout=timeout + GRACE_S)
        if (out / contract.SMOKE_REPORT).is_file():
            write_atomic(out / IMAGE_SUM, f"{checksum}  {image.name}\n")
    if status != 0:
        raise CheckFailed(f"smoke suite of {image} failed (exit status {status}); report and logs in {out}")
