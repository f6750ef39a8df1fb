"""The DeepSpeed block's compile lines run for real in the CPU image's devel layer, with an op
left to the second pass (as stochastic_transformer is on CUDA images, where it shares
transformer's sources): the wheel holds both ops, and each one's module exports its own
PyInit_ function. A GPU host with 16 cores showed what a shared parallel pass does: the
stochastic op linked transformer's objects and would not load (recipes/deepspeed-ops.yaml).

The wheel is kept in the user's cache under a hash of what made it (the lines, the switches and
the devel layer's key), as a layer is: a rerun with the same inputs checks the same wheel, in
seconds instead of the 2.7 minutes its compile takes here."""

import hashlib
import json
import subprocess
import zipfile

from conftest import RECIPES

from builder.fileio import write_bytes_atomic
from builder.host import cache, sidecar
from builder.host.progress import Progress
from builder.layerbuild import host_settings
from builder.recipes.tree import RecipeTree
from builder.render.blocks import deepspeed
from builder.render.layer_sharing import plan_layers
from builder.render.parts import HOST_MOUNT, HOST_SETTINGS

# two small CPU ops: one in the parallel pass, one after it
OPS = {"DS_BUILD_CPU_ADAGRAD": "cpu_adagrad", "DS_BUILD_CPU_LION": "cpu_lion"}
LATER = ("DS_BUILD_CPU_LION",)


def test_the_two_pass_lines_render_only_where_an_op_shares_sources(tree):
    lines = deepspeed.compile_commands("0.19.8", later=LATER)
    assert 'DS_BUILD_CPU_LION=0 MAX_JOBS=1 python setup.py --quiet build_ext -j "$jobs"' in lines
    assert 'MAX_JOBS="$jobs" python setup.py --quiet build_ext bdist_wheel -d "$ds_tmp/wheel"' in lines
    assert tree.target("h100-cuda").deepspeed.compiled_later == ("DS_BUILD_STOCHASTIC_TRANSFORMER",)
    assert tree.target("cpu").deepspeed.compiled_later == ()


def test_an_op_left_to_the_second_pass_is_in_the_wheel_and_exports_its_own_module(cpu_image, apptainer, tmp_path):
    tree = RecipeTree(RECIPES)
    target = tree.target("cpu")
    build = next(part for part in deepspeed.parts(target) if part.stage == "build")
    # every switch off but the two ops'
    env = [(k, ("1" if k in OPS else "0") if k.startswith("DS_BUILD_") and k != "DS_BUILD_OPS" else v)
           for k, v in build.build_env]  # fmt: skip
    host = tmp_path / "host"
    host_settings.write(host, plan_layers(tree, "cpu")["image"].pip_indexes, Progress())
    out = tmp_path / "out"
    out.mkdir()
    script = "\n".join(
        [
            "set -eu",
            f". {HOST_SETTINGS}",
            *deepspeed.EXEC_TMP,
            *deepspeed.compile_commands(target.deepspeed.version, later=LATER),
            f"cp {deepspeed.WHEELS}/deepspeed-*.whl /out/",
            'rm -rf "$ds_tmp"',
        ]
    )
    devel = cpu_image.parent / "cpu.devel.sif"
    kept = kept_wheels(script, env, sidecar.current_key(devel))
    wheel = next(kept.glob("deepspeed-*.whl"), None)
    if wheel is None:
        wheel = compile_wheel(apptainer, target, env, host, out, script, devel)
        write_bytes_atomic(kept / wheel.name, wheel.read_bytes())  # whole or not at all
    check_wheel(wheel, tmp_path)


def kept_wheels(script, env, devel_key):
    """The cache folder for the wheel these inputs make."""
    assert devel_key, "the CPU image's devel layer has no record of its key"
    made_from = json.dumps([script, env, devel_key], sort_keys=True).encode()
    return cache.cache_dir() / "test-deepspeed-compile" / hashlib.sha256(made_from).hexdigest()[:16]


def compile_wheel(apptainer, target, env, host, out, script, devel):
    argv = [
        apptainer, "exec", "--cleanenv", "--bind", f"{host}:{HOST_MOUNT}", "--bind", f"{out}:/out",
        f"--env=PATH={target.python.venv}/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        *[f"--env={k}={v}" for k, v in env], str(devel), "sh", "-c", script,
    ]  # fmt: skip
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:]
    return next(out.glob("deepspeed-*.whl"))


def check_wheel(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as archive:
        modules = {name.rsplit("/", 1)[-1].split(".")[0]: name for name in archive.namelist() if name.endswith(".so")}
        assert {f"{op}_op" for op in OPS.values()} <= set(modules), sorted(modules)
        for op in OPS.values():
            path = tmp_path / f"{op}_op.so"
            path.write_bytes(archive.read(modules[f"{op}_op"]))
            symbols = subprocess.run(
                ["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True, check=True, timeout=60
            ).stdout
            exported = sorted(word for word in symbols.split() if word.startswith("PyInit_"))
            assert exported == [f"PyInit_{op}_op"], (op, exported)
