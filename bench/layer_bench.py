"""Intermediate layers packed (gzip squashfs, Apptainer's default) against uncompressed,
side by side in one run on this machine, from the CPU target's devel layer as it is.

For each way: the base layer's build time and size, then the image layer's build time on
top of that base (it unpacks the base again). Needs images/cpu.devel.sif (make build); the
image layer takes the DeepSpeed wheel that build kept in the user's cache (no op compile).
Usage: python bench/layer_bench.py [--images DIR] [--quick]     (about 12 minutes on 2 cores)

--quick: the same two ways through the same calls (render, layer keys, build_layer), with two
tiny definitions in place of the target's base and image layers: a "base" of 23 MB of text
that %setup writes (Bootstrap: scratch: no OS, no %post) and an "image" that starts from it
and adds a label. About ten seconds; it checks the bench runs, its figures are not the
layers'.
"""

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from builder.host import build_route, hostinfo  # noqa: E402
from builder.host.progress import Progress  # noqa: E402
from builder.host.which_apptainer import find_apptainer  # noqa: E402
from builder.layerbuild import layers, store  # noqa: E402
from builder.recipes.tree import RecipeTree  # noqa: E402
from builder.render.layer_sharing import plan_layers  # noqa: E402
from builder.render.plan import LayerPlan  # noqa: E402

QUICK_BASE = """Bootstrap: scratch

%setup
seq 1 3000000 > "$APPTAINER_ROOTFS/numbers"
"""
QUICK_IMAGE = """Bootstrap: localimage
From: {{ BASE }}

%labels
org.hpc-ml-containers.bench layer_bench --quick
"""


def timed_layer(apptainer, plan, sif, args, log):
    started = time.monotonic()
    args = store.used_args(plan, args)
    layers.build_layer(
        layers.LayerBuild(
            plan=plan,
            apptainer=apptainer,
            sif=sif,
            key=store.build_key(plan.text, args),
            args=args,
            log=log,
            route=build_route.check(),
        ),
        Progress(),
    )
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=Path, default=ROOT / "images")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="two tiny definitions on the devel layer instead of the target's base and image",
    )
    options = parser.parse_args()
    devel = (options.images / "cpu.devel.sif").resolve()
    if not devel.is_file():
        sys.exit(f"{devel} is missing; run: make build")
    tree = RecipeTree(ROOT / "recipes")
    target = tree.target("cpu")
    plans = plan_layers(tree, "cpu")
    if options.quick:
        plans = {
            "base": LayerPlan("base", "cpu", QUICK_BASE),
            "image": LayerPlan("image", "cpu", QUICK_IMAGE, build_args=("BASE",), parents=("base",)),
        }
        print("quick mode: tiny base and image definitions (not the layers' figures)", flush=True)
    apptainer, _ = find_apptainer(target.sites[0], Progress(), options.images)
    mirror = {"MIRROR": hostinfo.debian_mirror()}
    work = Path(tempfile.mkdtemp(prefix="hpcml-layer-bench-", dir=options.images))
    try:
        rows = []
        # a layer is written uncompressed when the plan says it is intermediate (base), packed
        # when it ships (image): the same base plan, once as each
        for name, base_plan in (
            ("packed", dataclasses.replace(plans["base"], layer="image")),
            ("uncompressed", plans["base"]),
        ):
            base = work / f"base-{name}.sif"
            base_s = timed_layer(apptainer, base_plan, base, dict(mirror, DEVEL=str(devel)), work / f"base-{name}.log")
            image = work / f"image-{name}.sif"
            image_s = timed_layer(
                apptainer, plans["image"], image, {"DEVEL": str(devel), "BASE": str(base)}, work / f"image-{name}.log"
            )
            rows.append((name, base_s, base.stat().st_size, image_s))
            print(
                f"{name:<13} base {base_s:6.1f} s, {base.stat().st_size / 1e6:6.1f} MB; image on it {image_s:6.1f} s",
                flush=True,
            )
        (_, packed_base, _, packed_image), (_, raw_base, _, raw_image) = rows
        print(f"base layer time   uncompressed / packed: {raw_base / packed_base:.2f}")
        print(f"base + image time uncompressed / packed: {(raw_base + raw_image) / (packed_base + packed_image):.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
