"""The stand-in for a site's own image (LUMI AI Factory's): a copy of the recipes with a site
`standin` whose image is a file of ours, and a target `standin-image` built on it. The site-image
route's tests (layerbuild/test_site_image.py) and the unprivileged user's build
(images/test_user_build.py) take it."""

import shutil
from pathlib import Path

from conftest import RECIPES


def stand_in_recipes(folder: Path, image: Path) -> Path:
    """A copy of the recipes with a site `standin` whose own image is ``image``, and a target
    `standin-image` built on it."""
    recipes = folder / "recipes"
    shutil.copytree(RECIPES, recipes)
    site = (RECIPES / "sites" / "local.yaml").read_text()
    site += f"site_image:\n  path: {image}\n  module_use: [{folder / 'modules'}]\n  module_load: [standin-bindings]\n"
    site += (  # where the site builds it when a login node cannot (run/build_job.py)
        "  build_job: {partition: cpu, cpus: 2, tmpdir: /tmp, source: 'https://example.org/build-in-a-job', "
        "read: '2026-12-07'}\n"
    )
    (recipes / "sites" / "standin.yaml").write_text(site)
    (recipes / "targets" / "standin-image.yaml").write_text(
        "description: the site-image route on a stand-in base\n"
        "sites: [standin]\n"
        "site_image: true\n"
        "python: {frameworks: true}\n"
        "torch: {flavour: cpu}\n"
        "deepspeed:\n"
        "  accelerator: cpu\n"
        "  skip:\n"
        "    async_io: as the cpu target\n"
        "    deepspeed_ccl_comm: as the cpu target\n"
        "    cpu_adagrad: not used by the smoke suite; compiling it would only make the test slower\n"
        "    cpu_lion: not used by the smoke suite; compiling it would only make the test slower\n"
        "comm: {library: gloo}\n"
        "mpi: {abi: openmpi, mpi4py: false}\n"
    )
    return recipes
