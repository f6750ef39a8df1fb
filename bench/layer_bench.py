"""Intermediate layers packed (gzip squashfs, Apptainer's default) against uncompressed,
side by side in one run on this machine, from the CPU target's devel layer as it is.

For each way: the base layer's build time and size, then the image layer's build time on
top of that base (it unpacks the base again). Needs images/cpu.devel.sif (make build).
Usage: python bench/layer_bench.py [--images DIR]     (about 12 minutes on 2 cores)
"""

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from builder.build import layers  # noqa: E402
from builder.build.images import find_runtime  # noqa: E402
from builder.build.progress import Progress  # noqa: E402
from builder.recipes.tree import RecipeTree  # noqa: E402
from builder.render.definition import render_all  # noqa: E402


def timed_layer(runtime, text, sif, args, log, packed, wheels=None):
    started = time.monotonic()
    layers.build_layer(runtime, text, sif, "bench", args, log, wheels, Progress(), packed=packed)
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=Path, default=ROOT / "images")
    options = parser.parse_args()
    devel = (options.images / "cpu.devel.sif").resolve()
    if not devel.is_file():
        sys.exit(f"{devel} is missing; run: make build")
    target = RecipeTree(ROOT / "recipes").target("cpu")
    texts = render_all(target)
    runtime, _ = find_runtime(target.sites[0], Progress(), options.images)
    mirror = {"MIRROR": layers.hostinfo.debian_mirror()}
    work = Path(tempfile.mkdtemp(prefix="hpcml-layer-bench-", dir=options.images))
    wheels = layers._wheel_cache(target, layers.layer_keys(texts, mirror)["devel"])
    try:
        rows = []
        for packed in (True, False):
            name = "packed" if packed else "uncompressed"
            base = work / f"base-{name}.sif"
            base_s = timed_layer(runtime, texts["base"], base, dict(mirror, DEVEL=str(devel)),
                                 work / f"base-{name}.log", packed)
            image = work / f"image-{name}.sif"
            image_s = timed_layer(runtime, texts["image"], image, {"DEVEL": str(devel), "BASE": str(base)},
                                  work / f"image-{name}.log", True, wheels)
            rows.append((name, base_s, base.stat().st_size, image_s))
        print()
        for name, base_s, size, image_s in rows:
            print(f"{name:<13} base {base_s:6.1f} s, {size / 1e6:5.0f} MB; image on it {image_s:6.1f} s")
        (_, packed_base, _, packed_image), (_, raw_base, _, raw_image) = rows
        print(f"base layer time   uncompressed / packed: {raw_base / packed_base:.2f}")
        print(f"base + image time uncompressed / packed: "
              f"{(raw_base + raw_image) / (packed_base + packed_image):.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
