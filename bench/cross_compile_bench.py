"""An aarch64 image's compiles on this x86-64 host, two ways side by side in one run: `emulated`
(the image's own g++ and nvcc under QEMU, as a plain build of gh200-cuda would run them) and
`cross` (the x86-64 compilers of builder/host/cross_tools.py, as `builder build` binds them).
Rounds interleaved, cross first. Prints each time and the ratio emulated / cross.

Full mode: DeepSpeed ops of gh200-cuda compiled in its devel layer the way its top layer
compiles them (the .def's lines from deepspeed.compile_commands, its DS_BUILD_* switches with
only --ops on), into a wheel. Needs images/gh200-cuda.devel.sif (make build TARGET=gh200-cuda)
and a reachable package index; minutes a round for the cross way, many more emulated.
--quick --arm-image SIF: a small C++ program compiled and linked both ways in the aarch64 test
image (tests/helpers/arm_image.py, which has g++); checks the bench runs, its ratio says little
about the ops.

Usage: python bench/cross_compile_bench.py [--images DIR] [--ops cpu_adam,fused_adam] [--rounds N]
       python bench/cross_compile_bench.py --quick --arm-image SIF
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from builder.host import cross_tools  # noqa: E402
from builder.host.progress import Progress  # noqa: E402
from builder.host.which_apptainer import ready_apptainer  # noqa: E402
from builder.layerbuild import host_settings  # noqa: E402
from builder.recipes.tree import RecipeTree  # noqa: E402
from builder.render.blocks import deepspeed, parts_by_layer  # noqa: E402
from builder.render.layer_sharing import plan_layers  # noqa: E402
from builder.render.parts import CROSS_MOUNT, HOST_MOUNT, HOST_SETTINGS  # noqa: E402

TARGET = "gh200-cuda"
ENTER = f'cross={CROSS_MOUNT}; . "$cross/enter.sh"'
PROGRAM = r"""
#include <algorithm>
#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <vector>
int main() {
    std::map<std::string, std::vector<int>> seen;
    std::regex word("[a-z]+");
    std::string text = "emulated compiles run many times slower than native ones";
    for (auto it = std::sregex_iterator(text.begin(), text.end(), word); it != std::sregex_iterator(); ++it)
        seen[it->str()].push_back(int(it->position()));
    std::cout << "words " << seen.size() << std::endl;
}
"""


def ops_script(way, target):
    """The .def's compile lines, the cross way with the x86-64 compilers entered first."""
    lines = [*deepspeed.EXEC_TMP, """trap 'rm -rf "$ds_tmp"' EXIT"""]
    lines += [ENTER] if way == "cross" else []
    compile_ops = deepspeed.compile_commands(target.deepspeed.version, before=deepspeed.cpu_stand_in(target.arch))
    lines += [*compile_ops, f"ls -l {deepspeed.WHEELS}/deepspeed-*.whl"]
    return "\n".join(["set -eu", f". {HOST_SETTINGS}", *lines]) + "\n"


def quick_script(way):
    compiler = f'{ENTER}; "$CXX"' if way == "cross" else "g++"
    return f"set -eu; {compiler} -O2 -o /src/prog-{way} /src/prog.cpp; /src/prog-{way}"


def time_once(apptainer, image, binds, env, script, way):
    argv = [apptainer, "exec", "--cleanenv", "--writable-tmpfs"]
    for source, mount in binds:
        argv += ["--bind", f"{source}:{mount}"]
    argv += [*(f"--env={k}={v}" for k, v in env), str(image), "sh", "-c", script]
    started = time.monotonic()
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=6 * 3600)
    seconds = time.monotonic() - started
    if result.returncode:
        sys.exit(f"{way} compile failed (exit {result.returncode}):\n{result.stdout[-3000:]}")
    print(f"  {way:<8} {seconds:8.1f} s   {result.stdout.strip().splitlines()[-1]}", flush=True)
    return seconds


def ops_env(target, ops):
    """The build environment of the top layer: the devel layer's exports and DeepSpeed's
    switches, every op off but ``ops``."""
    inherited = [kv for part in parts_by_layer(target)["base"] if part.stage == "build" for kv in part.build_env]
    build = next(p for p in deepspeed.parts(target) if p.stage == "build")
    switches = {f"DS_BUILD_{op.upper()}" for op in ops}
    unknown = switches - {k for k, _ in build.build_env}
    if unknown:
        sys.exit(f"--ops: {', '.join(sorted(unknown))} are not switches of {target.name}'s DeepSpeed")
    env = [(k, "1" if k in switches else "0") if k.startswith("DS_BUILD_") else (k, v) for k, v in build.build_env]
    path = dict(inherited).get("PATH", "/usr/bin:/bin").replace("${PATH}", "/usr/sbin:/usr/bin:/sbin:/bin")
    return [(k, v) for k, v in inherited if k != "PATH"] + [("PATH", path)] + env


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=Path, default=ROOT / "images")
    parser.add_argument("--ops", default="cpu_adam,fused_adam", help="DeepSpeed ops to compile (full mode)")
    parser.add_argument("--rounds", type=int, default=1, help="pairs to time (default 1)")
    parser.add_argument("--quick", action="store_true", help="a small C++ program in --arm-image instead")
    parser.add_argument("--arm-image", type=Path, help="the aarch64 test image (--quick)")
    options = parser.parse_args()
    tree = RecipeTree(ROOT / "recipes")
    target = tree.target(TARGET)
    root = cross_tools.ensure(target, Progress())
    if root is None:
        sys.exit("the x86-64 compilers need an x86-64 host and root (builder/host/cross_tools.py)")
    apptainer = ready_apptainer(tree.target("cpu").sites[0])
    work = Path(tempfile.mkdtemp(prefix="hpcml-cross-bench-"))
    binds = [(root, f"{CROSS_MOUNT}:ro")]
    try:
        if options.quick:
            if not (options.arm_image and options.arm_image.is_file()):
                sys.exit("--quick needs --arm-image SIF (the aarch64 test image with g++)")
            image, env = options.arm_image, []
            (work / "prog.cpp").write_text(PROGRAM)
            binds.append((work, "/src"))
            scripts = {way: quick_script(way) for way in ("cross", "emulated")}
            print(f"a C++ program (<regex>, <map>) in {image.name}")
        else:
            image = (options.images / f"{TARGET}.devel.sif").resolve()
            if not image.is_file():
                sys.exit(f"{image} is missing; run: make build TARGET={TARGET}")
            ops = options.ops.split(",")
            env = ops_env(target, ops)
            # the host's CA bundle, pip indexes and wheels, as a build's %post gets them
            host_settings.write(work / "host", plan_layers(tree, TARGET)["image"].pip_indexes, Progress())
            (work / "host" / "cross").mkdir()
            binds.insert(0, (work / "host", HOST_MOUNT))
            scripts = {way: ops_script(way, target) for way in ("cross", "emulated")}
            archs = ",".join(target.archs)
            print(f"DeepSpeed {target.deepspeed.version} ops {', '.join(ops)} for {archs} in {image.name}")
        pairs = []
        for _ in range(options.rounds):  # interleaved, so drift hits both ways
            cross = time_once(apptainer, image, binds, env, scripts["cross"], "cross")
            emulated = time_once(apptainer, image, binds, env, scripts["emulated"], "emulated")
            pairs.append((emulated, cross))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    emulated, cross = (statistics.median(way) for way in zip(*pairs))
    ratio = statistics.median(e / c for e, c in pairs)
    print(
        f"emulated {emulated:.1f} s, cross {cross:.1f} s; ratio emulated / cross {ratio:.1f} "
        f"(median of {len(pairs)} pair(s))"
    )


if __name__ == "__main__":
    main()
