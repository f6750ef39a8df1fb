"""One compile of DeepSpeed's ops for the CPU target inside its devel layer, the way the top
layer builds them: `--way parallel` (the sdist's build_ext -j, as the .def does now) or
`--way serial` (pip wheel, one op after another, as before). Time the two side by side with
farm-bench:

  farm-bench -n 1 --warmup 0 --timeout 3600 --vs 'python bench/ds_compile_bench.py --way serial' \\
      -- python bench/ds_compile_bench.py --way parallel

Needs images/cpu.devel.sif (make build) and a reachable package index.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from builder.build import hostinfo  # noqa: E402
from builder.build.images import ready_runtime  # noqa: E402
from builder.recipes.tree import RecipeTree  # noqa: E402
from builder.render.blocks import deepspeed  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--way", choices=("parallel", "serial"), required=True)
    parser.add_argument("--images", type=Path, default=ROOT / "images")
    options = parser.parse_args()
    target = RecipeTree(ROOT / "recipes").target("cpu")
    build = next(p for p in deepspeed.parts(target) if p.stage == "build")
    compile_lines = deepspeed.compile_commands(target.deepspeed.version)
    if options.way == "serial":
        compile_lines = [f"pip wheel --no-build-isolation --no-deps --no-cache-dir -w "
                         f"{deepspeed.WHEELS} deepspeed=={target.deepspeed.version}"]
    work = Path(tempfile.mkdtemp(prefix="hpcml-ds-bench-"))
    script = "set -eu\n" + "\n".join(compile_lines).replace("/tmp/", f"{work}/") + \
        f"\nls {work}/deepspeed-wheel/deepspeed-*.whl\n"
    try:
        subprocess.run([ready_runtime(target.sites[0]), "exec", "--cleanenv", *_host_pip(work),
                        f"--env=PATH={target.venv}/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        *[f"--env={k}={v}" for k, v in build.build_env],
                        str(options.images / "cpu.devel.sif"), "sh", "-c", script], check=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _host_pip(work):
    """The host's CA bundle and pip indexes, as the build's /mnt settings give them (the CA
    bundle copied first: a toolbox sees its own /etc, not the host's)."""
    pip = hostinfo.pip_settings()
    flags = []
    if pip["cert"]:
        shutil.copyfile(pip["cert"], work / "ca.crt")
        flags += ["--bind", f"{work / 'ca.crt'}:/mnt/ca.crt"]
        flags += [f"--env={var}=/mnt/ca.crt" for var in ("PIP_CERT", "SSL_CERT_FILE")]
    if pip["index_url"]:
        flags.append(f"--env=PIP_INDEX_URL={pip['index_url']}")
    if pip["extra_index_urls"]:
        flags.append(f"--env=PIP_EXTRA_INDEX_URL={' '.join(pip['extra_index_urls'])}")
    return flags


if __name__ == "__main__":
    main()
