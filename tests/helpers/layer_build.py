"""One layer built by the builder's own build_layer in a fresh interpreter, as `build` runs
each: for the fault tests of a layer build (test_build, test_build_space)."""

import os
import subprocess
import sys

from conftest import RECIPES, ROOT
from helpers.child_signals import default_signals

BUILD_ONE_LAYER = """
import sys
from pathlib import Path
from builder.layerbuild.layers import LayerBuild, build_layer
from builder.render.plan import LayerPlan
from builder.host import build_route
from builder.host.which_apptainer import find_apptainer
from builder.errors import BuilderError
from builder.host.progress import Progress
from builder.recipes.tree import RecipeTree
text, sif = Path(sys.argv[1]).read_text(), Path(sys.argv[2])
site = RecipeTree(sys.argv[3]).sites["local"]
progress = Progress()
apptainer, _ = find_apptainer(site, progress, sif.parent)
# extra arguments, as a layer plan would say them: --uncompressed (an intermediate layer),
# --kept=FOLDER (a kept step's folder), --index=URL (a pip index its text names)
extra = sys.argv[5:]
plan = LayerPlan(layer="base" if "--uncompressed" in extra else "image", owner="x", text=text,
                 build_args=("BASE",), parents=("base",),
                 kept=tuple(a.split("=", 1)[1] for a in extra if a.startswith("--kept=")),
                 pip_indexes=tuple(a.split("=", 1)[1] for a in extra if a.startswith("--index=")))
try:
    build_layer(LayerBuild(plan=plan, apptainer=apptainer, sif=sif, key="k", args={"BASE": sys.argv[4]},
                           log=sif.parent / "x.build.log", route=build_route.check(site)), progress)
except BuilderError as error:
    print(error, file=sys.stderr)
    sys.exit(error.exit_status)
"""


def start_layer_build(tmp_path, post, *extra, base, env=None):
    """The build of a one-section layer on ``base`` (the CPU image's base layer), started;
    (process, images folder, the previous image it must leave as it was)."""
    images = tmp_path / "images"
    images.mkdir(exist_ok=True)
    previous = images / "x.sif"
    previous.write_bytes(b"the previous image\n")
    definition = tmp_path / "x.def"
    definition.write_text(f"Bootstrap: localimage\nFrom: {{{{ BASE }}}}\n\n%post\n{post}\n")
    private_tmp = tmp_path / "tmp"  # the build's work files, apart from other builds'
    private_tmp.mkdir(exist_ok=True)
    process = subprocess.Popen(
        [sys.executable, "-c", BUILD_ONE_LAYER, definition, previous, RECIPES, base, *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, TMPDIR=str(private_tmp), APPTAINER_TMPDIR=str(private_tmp), **(env or {})),
        preexec_fn=default_signals,  # the fault tests stop it with SIGINT, as Ctrl-C does
    )
    return process, images, previous
