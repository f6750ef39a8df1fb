"""Rendered definition files: current, deterministic, and carrying what each site needs."""

import functools
import json
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import CONTAINERS, RECIPES, ROOT, TARGETS, recipe_tree, run_builder
from helpers import deffile
from helpers.cli_here import run_here

from builder import contract
from builder.lockfile import PythonLock
from builder.recipes.tree import RecipeTree
from builder.render import runtime_wheel
from builder.render.blocks import frameworks as frameworks_block
from builder.render.blocks import torch as torch_block
from builder.render.definition import LAYERS
from builder.render.layer_sharing import plan_layers

_TREE = recipe_tree()
# the committed definitions, which the tests of each file take: they are the layers the plan
# writes (test_every_target_has_its_committed_layers_and_no_extras)
COMMITTED = sorted(p.name for p in CONTAINERS.glob("*.def"))


@functools.cache
def wheel_name() -> str:
    return runtime_wheel.current().name


@functools.cache
def layer_files() -> dict:
    """{target: {layer: file}}: a target that shares its parent's devel and base layers
    commits its image layer only (worked out when a test asks, not at each worker's collection)."""
    return {t: {layer: plan.file_name for layer, plan in plan_layers(_TREE, t).items()} for t in TARGETS}


def planned_files() -> list:
    return sorted({file for files in layer_files().values() for file in files.values()})


def stages_of(file):
    return deffile.split((CONTAINERS / file).read_text())


def section(name, stage, kind):
    """A section of a target's stage, looked up across its layer files
    (stages: devel in .devel.def, base in .base.def, build and final in .def)."""
    for layer in (layer for layer in LAYERS if layer in layer_files()[name]):  # a site-image target has one
        for found in stages_of(layer_files()[name][layer]):
            if found.header["Stage"] == stage and found.section(kind) is not None:
                return found.section(kind).body
    raise AssertionError(f"{name}: no stage {stage} with a %{kind}")


@pytest.mark.parametrize("name", TARGETS)
def test_committed_defs_match_recipes(tree, name):
    # containers/*.def are the golden files for whole targets, one per layer
    for plan in plan_layers(tree, name).values():
        assert plan.text == (CONTAINERS / plan.file_name).read_text(), (
            f"containers/{plan.file_name} is stale; run: python -m builder render --all"
        )


def test_every_target_has_its_committed_layers_and_no_extras():
    assert COMMITTED == planned_files()
    assert {"cpu", "lumi-rocm", "v100-cuda", "a100-cuda", "h100-cuda", "csc-cuda"} <= set(TARGETS)
    # aliases render nothing of their own
    assert not list(CONTAINERS.glob("puhti-cuda*")) and not list(CONTAINERS.glob("mahti-cuda*"))


def test_layers_start_from_each_other_by_build_argument():
    top, base = stages_of("cpu.def"), stages_of("cpu.base.def")
    assert [(s.header["Bootstrap"], s.header["From"]) for s in top] == [
        ("localimage", "{{ DEVEL }}"),
        ("localimage", "{{ BASE }}"),
    ]
    assert (base[0].header["Bootstrap"], base[0].header["From"]) == ("localimage", "{{ DEVEL }}")
    assert base[1].section("files", "from devel") is not None


def test_render_is_byte_identical_across_runs_and_hash_seeds(tmp_path):
    outputs = []
    for seed in ("0", "12345"):
        out = tmp_path / seed
        result = run_builder(
            "render", "--all", "--recipes", RECIPES, "--out", out, cwd=tmp_path, env={"PYTHONHASHSEED": seed}
        )
        assert result.returncode == 0, result.stderr
        outputs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert outputs[0] == outputs[1]
    assert sorted(outputs[0]) == sorted(planned_files() + [wheel_name()])


def test_second_render_leaves_files_untouched(tmp_path):
    out = tmp_path / "out"
    assert run_here("render", "cpu", "--out", out).returncode == 0
    before = (out / "cpu.def").stat().st_mtime_ns
    again = run_here("render", "cpu", "--out", out)
    assert "unchanged" in again.stdout
    assert (out / "cpu.def").stat().st_mtime_ns == before
    assert sorted(p.name for p in out.iterdir()) == sorted(["cpu.base.def", "cpu.def", "cpu.devel.def", wheel_name()])


def test_check_passes_on_the_repository():
    result = run_here("check")
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout


def test_check_fails_when_a_version_bump_is_not_rendered(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    versions = recipes / "versions.yaml"
    versions.write_text(versions.read_text().replace("deepspeed: 0.19.8", "deepspeed: 0.19.9"))
    for lock in (recipes / "locks").glob("*/python.txt"):  # as `hpcml lock --all` would move them
        lock.write_text(lock.read_text().replace("deepspeed==0.19.8", "deepspeed==0.19.9"))
    result = run_here("check", "--recipes", recipes, "--out", CONTAINERS)
    assert result.returncode == 1
    assert "containers/cpu.def is stale" in result.stderr
    # DeepSpeed is in the top layer: the devel and base layers (OS, torch) stay as they are
    assert "cpu.devel.def" not in result.stderr and "cpu.base.def" not in result.stderr
    assert "Traceback" not in result.stderr


def test_check_reports_missing_and_orphaned_files(tmp_path):
    out = tmp_path / "out"
    shutil.copytree(CONTAINERS, out)
    (out / "cpu.base.def").unlink()
    (out / "retired.def").write_text("old\n")
    result = run_here("check", "--out", out)
    assert result.returncode == 1
    assert "cpu.base.def is missing" in result.stderr and "retired.def has no recipe" in result.stderr


# --- what each target must carry --------------------------------------------------------


def test_lumi_builds_the_network_plugin_and_libfabric_from_pinned_commits():
    post = section("lumi-rocm", "devel", "post")
    for repo, commit in (
        ("aws/aws-ofi-nccl", "2475c4c736907e68ebeadb3848f31231ee4a44d0"),  # v1.21.1
        # LUMI's Slingshot user space since its January 2026 maintenance (LAIF's variables)
        ("ofiwg/libfabric", "78d6e031bd644b3dd5215a4b138a4bf193c15dfe"),
        ("HewlettPackard/shs-libcxi", "30fa2ddd65a234158b9331e39d6786bf0c337dc0"),
        ("HewlettPackard/shs-cxi-driver", "27f7be52e4b1ee6e8ce0c5674352a60869c02105"),
    ):
        assert f"fetch -q --depth 1 https://github.com/{repo}.git {commit}" in post
        assert f'rev-parse HEAD)" = {commit} ||' in post
    assert "archive/" not in post and "curl -" not in post  # no tarball whose bytes we cannot check
    # libfabric with the CXI provider built in, then the plugin for RCCL against it
    libfabric = post.index("--enable-cxi=/opt/libfabric")
    plugin = post.index("--with-libfabric=/opt/libfabric --with-rocm=/opt/rocm")
    assert libfabric < plugin
    assert "rm -f /opt/libfabric/lib/*.la" in post  # no rpath that a host libfabric cannot beat
    env = section("lumi-rocm", "final", "environment")
    # the loader's cache, not LD_LIBRARY_PATH, which a site's SINGULARITYENV_ replaces whole
    assert "LD_LIBRARY_PATH" not in env
    base_post = section("lumi-rocm", "base", "post")
    assert "/opt/aws-ofi-nccl/lib /opt/rocm/lib > /etc/ld.so.conf.d/hpcml-rccl.conf\nldconfig" in base_post
    assert "/opt/libfabric/lib > /etc/ld.so.conf.d/hpcml-libfabric.conf\nldconfig" in base_post
    assert "export LD_PRELOAD=/opt/rocm/lib/librccl.so.1" in env  # torch's own RCCL bypassed
    # by path: RCCL's default file name changed between ROCm releases
    assert "export NCCL_NET_PLUGIN=/opt/aws-ofi-nccl/lib/librccl-net.so" in env


def test_lumi_image_test_runs_a_check_for_each_network_trap():
    test = section("lumi-rocm", "final", "test")
    for line in (
        "python -m smoke.netcheck plugin --rccl /opt/rocm/lib/librccl.so.1 --libfabric-dir /opt/libfabric/lib",
        "python -m smoke.netcheck rccl --prefix /opt/rocm/ --import torch",
        "python -m smoke.netcheck provider --libfabric /opt/libfabric/lib/libfabric.so.1 --provider cxi",
        "python -m smoke.netcheck wavefront --record "
        "/opt/venv/share/hpc-ml-runtime/rocm-build.json --arch gfx90a --expected 64",
    ):
        assert line in test.splitlines()


def test_lumi_environment_follows_hpe_and_sets_nccl_net_on_multi_node_jobs_only():
    env = section("lumi-rocm", "final", "environment")
    for line in (
        "export NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3",
        "export FI_CXI_DISABLE_HOST_REGISTER=1",
        "export FI_CXI_DEFAULT_CQ_SIZE=131072",
        "export FI_MR_CACHE_MONITOR=userfaultfd",
        "export NCCL_CROSS_NIC=1",
        "export HSA_FORCE_FINE_GRAIN_PCIE=1",
    ):
        assert line in env.splitlines()
    # PHB hangs ROCm 7 images; NCCL_NET on one node breaks single-node runs
    assert "NCCL_NET_GDR_LEVEL" not in env and "NCCL_NET=" not in env
    site = (ROOT / "wrappers" / "sites" / "lumi.sh").read_text()
    # HPE's rendezvous settings go with srun --network=disable_rdzv_get, which only the job
    # scripts of multi-node jobs carry (tests/builder/run/test_jobscript_environment.py)
    assert "HPCML_MULTI_NODE_ENV=('NCCL_NET=AWS Libfabric' FI_CXI_RDZV_PROTO=alt_read" in site
    # the image's libfabric is LUMI's choice: no host libfabric bound in
    assert "HPCML_MULTI_NODE_BINDS=(/var/spool/slurmd)" in site
    assert "HPCML_MULTI_NODE_LIBRARY_PATH=()" in site


def test_lumi_pins_gfx90a_and_guards_the_arch_and_wavefront_during_the_op_build():
    assert "export PYTORCH_ROCM_ARCH=gfx90a" in section("lumi-rocm", "devel", "post")
    assert "export PYTORCH_ROCM_ARCH=gfx90a" in section("lumi-rocm", "final", "environment")
    post = section("lumi-rocm", "build", "post")
    assert "export PYTORCH_ROCM_ARCH=gfx90a" in post  # repeated for the top layer's op build
    guard = post.index("> /opt/rocm/bin/rocminfo")
    detect = post.index("from op_builder.builder import OpBuilder")
    build = post.index("build_ext -j")
    restore = post.index("mv /opt/rocm/bin/rocminfo.real /opt/rocm/bin/rocminfo")
    assert guard < detect < build < restore
    assert "Wavefront Size:          64(0x40)" in post
    assert '\' gfx90a 64 0.19.8 "$ds_tmp/wheel"/rocm-build.json' in post
    assert 'install -D -m 644 "$ds_tmp"/wheel/rocm-build.json /opt/venv/share/hpc-ml-runtime/rocm-build.json' in post


def test_lumi_carries_the_deepspeed_op_build_and_site_environment():
    post = section("lumi-rocm", "build", "post")
    for line in (
        "export DS_BUILD_OPS=1",
        "export DS_ACCELERATOR=cuda",
        "export DS_BUILD_FUSED_ADAM=1",
        "export DS_BUILD_EVOFORMER_ATTN=0",
        "export DS_BUILD_AIO=0",
    ):
        assert line in post
    assert "sed -i 's/hostname -I/hostname -s/g'" in post
    env = section("lumi-rocm", "final", "environment")
    for line in (
        "export NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3",
        "export CXI_FORK_SAFE=1",
        "export CXI_FORK_SAFE_HP=1",
        "export FI_CXI_DISABLE_CQ_HUGETLB=1",
    ):
        assert line in env
    # per job, made by the job script, which hands the values in (the image's own environment
    # is evaluated without the host's variables)
    assert "MIOPEN_USER_DB_PATH" in env
    assert "python -m smoke deepspeed" in section("lumi-rocm", "final", "test")
    labels = section("lumi-rocm", "final", "labels")
    assert "org.hpc-ml-containers.deepspeed.ops cpu_adagrad,cpu_adam,cpu_lion,fused_adam," in labels


@pytest.mark.parametrize(
    "name, arch_list", [("v100-cuda", "7.0"), ("a100-cuda", "8.0"), ("h100-cuda", "9.0"), ("csc-cuda", "'7.0;8.0'")]
)
def test_cuda_targets_carry_their_arch_list(name, arch_list):
    line = f"export TORCH_CUDA_ARCH_LIST={arch_list}"
    if layer_files()[name]["devel"] == f"{name}.devel.def":  # not a devel layer shared with another
        assert line in section(name, "devel", "post")  # torch
    assert line in section(name, "build", "post")  # DeepSpeed's ops
    assert line in section(name, "final", "environment")  # JIT builds at run time
    # torch's CUDA build comes from PyPI itself: no index Docker-less machines cannot reach
    assert "download.pytorch.org" not in section(name, "devel", "post")


@pytest.mark.parametrize(
    "name, torch_version",
    [("v100-cuda", "2.10.0"), ("csc-cuda", "2.10.0"), ("a100-cuda", "2.15.0"), ("h100-cuda", "2.15.0")],
)
def test_cuda_targets_start_from_debootstrap_and_pick_a_torch_with_their_archs(name, torch_version):
    stages = [stages_of(layer_files()[name]["devel"])[0], stages_of(layer_files()[name]["base"])[1]]
    assert [(s.header["Bootstrap"], s.header["OSVersion"]) for s in stages] == [("debootstrap", "trixie")] * 2
    devel = section(name, "devel", "post")
    assert re.search(rf"^torch=={re.escape(torch_version)} --hash=sha256:", devel, re.M)  # from the lock
    assert 'pip install --no-cache-dir --no-deps --require-hashes -r "$lock" "$@"' not in devel  # PyPI's own


def test_the_volta_route_compiles_with_debians_cuda_12_nvcc_and_gcc_13():
    devel = section("v100-cuda", "devel", "post").splitlines()
    areas = next(line for line in devel if "sources.list;" in line)
    assert "main contrib non-free" in areas and areas.index("sed") < len(areas)
    assert devel.index(areas) < devel.index("apt-get update")  # non-free before apt reads
    install = next(line for line in devel if line.startswith("apt-get install"))
    assert {"nvidia-cuda-toolkit", "g++-13"} <= {word.split("=")[0] for word in shlex.split(install)}
    for line in ("export CUDA_HOME=/usr", "export CC=gcc-13", "export CXX=g++-13"):
        assert line in devel
        assert line in section("v100-cuda", "build", "post").splitlines()  # the ops see it too
    assert "nvidia-cuda-toolkit" not in section("v100-cuda", "base", "post")  # not in the image


def test_the_hopper_and_ampere_route_takes_nvcc_from_pypi_at_torchs_cuda_release():
    devel = section("a100-cuda", "devel", "post").splitlines()
    # the lock holds the metapackage and the parts its extras name
    pins = {"cuda-toolkit==13.2.2", "nvidia-cuda-nvcc==13.2.86", "nvidia-curand==10.4.2.66"}
    assert pins <= {line.split(" ")[0] for line in devel}
    assert 'ln -sfn "$cuda_home" /opt/cuda' in devel
    assert any(line.startswith("for so in /opt/cuda/lib/lib*.so.*;") for line in devel)  # -lcurand
    assert "export CUDA_HOME=/opt/cuda" in section("a100-cuda", "build", "post").splitlines()
    assert "non-free" not in "\n".join(devel)


@pytest.mark.parametrize("name", ["v100-cuda", "a100-cuda"])
def test_cuda_ops_link_without_a_driver_and_need_none_to_load(name):
    build = section(name, "build", "post").splitlines()
    stub = '    gcc -shared -Wl,-soname,libcuda.so.1 -o "$ds_tmp/stubs/libcuda.so" -x c /dev/null'
    compile_at = next(i for i, line in enumerate(build) if "setup.py --quiet build_ext" in line)
    assert build.index(stub) < compile_at < build.index('    rm -rf "$ds_tmp/stubs"')
    assert "    export LDFLAGS=-Wl,--as-needed" in build[:compile_at]
    assert "stubs" not in section("cpu", "build", "post")


def test_ops_linked_against_the_pip_toolkit_find_its_libraries_in_the_image():
    """The a100-cuda build of 2026-12-07 failed its %test: libcurand.so.10 not found. The pip
    toolkit's curand stays in the venv; the ops name that folder as their run path."""
    rpath = '    toolkit_lib="$(readlink -f "$CUDA_HOME")/lib" && export LDFLAGS="$LDFLAGS -Wl,-rpath,$toolkit_lib"'
    build = section("a100-cuda", "build", "post").splitlines()
    compile_at = next(i for i, line in enumerate(build) if "setup.py --quiet build_ext" in line)
    assert build.index("    export LDFLAGS=-Wl,--as-needed") < build.index(rpath) < compile_at
    assert rpath not in section("v100-cuda", "build", "post").splitlines()  # Debian's toolkit: /usr/lib


NVCC_SPY = """#!/bin/sh
echo "pid $$ tmp $(ls -A /tmp | wc -l) args $*"
"""


@pytest.mark.skipif(
    subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True).returncode != 0,
    reason="this host refuses user namespaces: the image's lines fall back to nvcc as it is",
)
def test_each_nvcc_of_an_op_compile_has_the_same_process_id_and_a_tmp_of_its_own():
    """nvcc writes its front end's process ID into symbol names (two a100-cuda builds differed
    by them): the image's lines run each nvcc alone, here with a spy for nvcc, called as
    torch calls it in DeepSpeed's build (no ninja): $CUDA_HOME/bin/nvcc."""
    build = section("a100-cuda", "build", "post").splitlines()
    start = next(i for i, line in enumerate(build) if line.strip().startswith('toolkit="$CUDA_HOME"'))
    lines = [line.strip() for line in build[start : start + 2]]
    assert 'export CUDA_HOME="$ds_tmp/cuda"' in lines[1] and start + 1 < next(
        i for i, line in enumerate(build) if "setup.py --quiet build_ext" in line
    )
    # outside /tmp, which each nvcc sees empty, as the image's CUDA_HOME and $ds_tmp are
    with tempfile.TemporaryDirectory(dir="/var/tmp") as folder:
        here = Path(folder)
        for part in ("bin", "include", "lib"):
            (here / "cuda" / part).mkdir(parents=True)
        (here / "cuda" / "include" / "cuda.h").write_text("/* the toolkit's header */\n")
        (here / "cuda" / "bin" / "ptxas").write_text("")
        spy = here / "cuda" / "bin" / "nvcc"
        spy.write_text(NVCC_SPY)
        spy.chmod(0o755)
        (here / "ds" / "stubs").mkdir(parents=True)
        calls = ['"$CUDA_HOME/bin/nvcc" -c a.cu', '"$CUDA_HOME/bin/nvcc" -c b.cu', 'cat "$CUDA_HOME/include/cuda.h"']
        script = "\n".join(["set -eu", *lines, *calls, 'test -e "$CUDA_HOME/bin/ptxas"']) + "\n"
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CUDA_HOME": str(here / "cuda"), "ds_tmp": str(here / "ds")}
        ran = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=60)
        assert spy.read_text() == NVCC_SPY  # the toolkit's own nvcc is left as it is
    assert ran.returncode == 0, ran.stderr
    # the same process ID each time, an empty /tmp of its own, the arguments passed on; the
    # toolkit's other files where they were
    assert ran.stdout.splitlines() == [
        "pid 1 tmp 0 args -c a.cu",
        "pid 1 tmp 0 args -c b.cu",
        "/* the toolkit's header */",
    ]
    assert any('export CUDA_HOME="$ds_tmp/cuda"' in line for line in section("v100-cuda", "build", "post").splitlines())


def test_the_op_compile_works_in_a_folder_of_its_own():
    """%post can see the host's /tmp: a fixed folder there would mix two builds' compiles. The
    folder is fixed (the ops record its name: two builds write the same files) and in the root
    being built, which no other build sees."""
    build = section("cpu", "build", "post").splitlines()
    # build, restore; each removes what an earlier, failed try left
    assert build.count('    ds_tmp=/usr/src/hpcml-deepspeed && rm -rf "$ds_tmp" && mkdir -p "$ds_tmp"') == 2
    assert not [line for line in build if "/tmp/deepspeed" in line]
    assert build[-1] == 'rm -rf "$ds_tmp"' or 'rm -rf "$ds_tmp"' in build


@pytest.mark.parametrize("name", ["v100-cuda", "a100-cuda", "lumi-rocm"])
def test_gpu_images_record_what_only_the_build_knows_as_labels(name):
    post = section(name, "final", "post")
    assert '"${APPTAINER_LABELS:-${SINGULARITY_LABELS:-/dev/null}}"' in post
    # an assignment, so that a failure stops the build (runtime/smoke/labels.py measures)
    assert 'measured="$(/opt/venv/bin/python -m smoke.labels org.hpc-ml-containers)"' in post
    assert (
        '"min_driver": {"12": "525.60.13", "13": "580.65.06"}' in section(name, "build", "post") or name == "lumi-rocm"
    )
    assert "APPTAINER_LABELS" not in section("cpu", "final", "post")


def test_cpu_target_builds_every_cpu_op_but_oneccl_from_a_debootstrap_base():
    stages = [stages_of("cpu.devel.def")[0], stages_of("cpu.base.def")[1]]
    assert [s.header["Bootstrap"] for s in stages] == ["debootstrap", "debootstrap"]
    assert all(s.header["MirrorURL"] == "{{ MIRROR }}" for s in stages)  # mirror comes as build-arg
    post = section("cpu", "build", "post")
    for line in (
        "export DS_BUILD_OPS=1",
        "export DS_BUILD_CPU_ADAM=1",
        "export DS_BUILD_SHM_COMM=1",
        "export DS_BUILD_FUSED_ADAM=1",
        "export DS_BUILD_PIN_MEMORY=1",
        "export DS_BUILD_CCL_COMM=0",
        "export DS_BUILD_NOT_IMPLEMENTED=0",
    ):
        assert line in post.splitlines()
    assert "export DS_BUILD_AIO=0" in post.splitlines()  # skipped, with its reason
    assert "python -m smoke deepspeed" in section("cpu", "final", "test")


def test_an_ops_packages_come_in_the_top_layer_not_the_os_layers():
    """libaio for async_io (v100-cuda prebuilds it) at build and at run time."""
    install = "apt-get install -y --no-install-recommends libaio-dev"
    assert install in section("v100-cuda", "build", "post")
    assert install in section("v100-cuda", "final", "post")
    for lower in ("devel", "base"):  # the lower layers' locks list it; their apt-get leaves it
        text = (CONTAINERS / f"v100-cuda.{lower}.def").read_text()
        installs = [line for line in text.splitlines() if "apt-get install" in line]
        assert installs and not any("libaio" in line for line in installs)
    assert "apt-get" not in section("cpu", "final", "post")  # no op of the CPU image needs one


def image_json(name):
    text = section(name, "build", "post")
    return json.loads(text.split("<<'IMAGE_JSON'\n", 1)[1].split("\nIMAGE_JSON", 1)[0])


def test_image_json_names_the_gpu_archs_and_the_driver_table_the_preflight_needs():
    assert image_json("cpu")["gpu"] is None
    assert image_json("csc-cuda")["gpu"] == {
        "archs": ["sm_70", "sm_80"],
        "min_driver": {"12": "525.60.13", "13": "580.65.06"},
    }
    # AMD's driver matrix instead of CUDA's table; the wavefront the ops must be compiled for
    rocm = image_json("lumi-rocm")["gpu"]
    assert {key: rocm[key] for key in ("archs", "wavefront_size")} == {"archs": ["gfx90a"], "wavefront_size": 64}
    assert rocm["amdgpu_runs"]["6.3"] == ["6.1", "6.2", "6.3", "6.4", "7.0"] and "7.2" in rocm["amdgpu_runs"]["30.10"]
    assert rocm["amdgpu_modules"]["6.10.5"] == "6.3" and "min_driver" not in rocm
    assert image_json("lumi-rocm")["comm"] == {
        "library": "rccl",
        "plugin": "aws-ofi-nccl",
        "provider": "cxi",
        "plugin_path": "/opt/aws-ofi-nccl/lib/librccl-net.so",
        "rccl": "/opt/rocm/lib/librccl.so.1",
        "libfabric_dir": "/opt/libfabric/lib",
    }
    assert "python -m smoke preflight" in section("cpu", "final", "test")


# --- kept steps: named by the hash of their inputs ---------------------------------------


def kept_folders(tree_dir, name):
    texts = [plan.text for plan in plan_layers(RecipeTree(tree_dir), name).values()]
    return {
        m.group(1).rsplit("-", 1)[0]: m.group(1)
        for text in texts
        for m in re.finditer(r"^kept=/mnt/kept/(\S+)$", text, re.M)
    }


def edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


def test_a_kept_output_follows_its_inputs_and_nothing_else(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    first = kept_folders(recipes, "lumi-rocm")
    assert set(first) == {"libfabric-cxi", "aws-ofi-nccl", "mpich", "deepspeed-wheel"}
    # torch feeds the op compile (headers, ABI) but not the network stack
    edit(recipes / "targets" / "lumi-rocm.yaml", "version: 2.10.0", "version: 2.10.1")
    torch_bump = kept_folders(recipes, "lumi-rocm")
    assert torch_bump["aws-ofi-nccl"] == first["aws-ofi-nccl"]
    assert torch_bump["libfabric-cxi"] == first["libfabric-cxi"]
    assert torch_bump["mpich"] == first["mpich"]
    assert torch_bump["deepspeed-wheel"] != first["deepspeed-wheel"]
    # an extra Python package in the top layer feeds neither
    edit(recipes / "versions.yaml", "python_packages:\n", "python_packages:\n  six: 1.17.0\n")
    edit(recipes / "targets" / "lumi-rocm.yaml", "packages: [numpy", "packages: [six, numpy")
    assert kept_folders(recipes, "lumi-rocm") == torch_bump
    # the OS packages of the plugin's stage do
    edit(recipes / "targets" / "lumi-rocm.yaml", "build: []", "build: [file]")
    assert kept_folders(recipes, "lumi-rocm")["aws-ofi-nccl"] != first["aws-ofi-nccl"]


@pytest.mark.parametrize("lower, upper", [("a100-cuda", "h100-cuda"), ("v100-cuda", "csc-cuda")])
def test_targets_on_one_devel_layer_keep_a_wheel_each_for_their_own_archs(lower, upper):
    # upper builds on lower's devel layer and exports its own TORCH_CUDA_ARCH_LIST over it: one
    # wheel for both would put the first build's archs in the second image
    tree = RecipeTree(RECIPES)
    assert tree.target(lower).archs != tree.target(upper).archs
    assert kept_folders(RECIPES, lower)["deepspeed-wheel"] != kept_folders(RECIPES, upper)["deepspeed-wheel"]


def test_a_kept_step_reuses_a_complete_output_and_saves_a_new_one(tmp_path):
    """The rendered region run by sh, with the step's commands as echoes."""
    from builder.render.definition import _kept_step
    from builder.render.parts import Kept

    kept = Kept(name="thing", build=("echo built > out",), save=('cp out "$kept/"',), restore=('cp "$kept/out" out',))
    folder, lines = _kept_step(kept, ["inputs"])
    script = "\n".join(["set -eu", *lines]).replace("/mnt/kept", str(tmp_path))
    run_in = tmp_path / "work"
    run_in.mkdir()
    first = subprocess.run(["sh", "-c", script], cwd=run_in, capture_output=True, text=True)
    assert first.returncode == 0 and "reusing" not in first.stdout  # no folder bound: just build
    assert re.fullmatch(r"thing-[0-9a-f]{16}", folder) and f"kept=/mnt/kept/{folder}" in lines
    slot = tmp_path / folder
    slot.mkdir()
    second = subprocess.run(["sh", "-c", script], cwd=run_in, capture_output=True, text=True)
    assert second.returncode == 0 and (slot / "complete").is_file() and (slot / "out").read_text() == "built\n"
    (run_in / "out").unlink()
    third = subprocess.run(["sh", "-c", script], cwd=run_in, capture_output=True, text=True)
    assert "reusing thing" in third.stdout and (run_in / "out").read_text() == "built\n"
    (slot / "out").write_text("kept\n")  # changed since it was saved: test_kept_sums.py
    assert subprocess.run(["sh", "-c", script], cwd=run_in, capture_output=True, text=True).returncode == 1


def test_only_build_stages_keep_outputs(tree):
    from builder.render.definition import StageText, _add_post
    from builder.render.parts import Kept, Part

    part = Part(block="x", stage="final", kept=Kept(name="x", build=("true",), save=(), restore=()))
    with pytest.raises(ValueError, match="only build stages"):
        _add_post(StageText("final", "localimage", "{{ BASE }}"), [part], "final")


def test_the_torch_index_is_left_out_only_when_the_builder_found_it_silent():
    """Unlocked (as a target without a lock installs); a locked install passes "$@" the same way."""
    assert 'pip install --no-cache-dir --no-deps --require-hashes -r "$lock" "$@"' in section("cpu", "devel", "post")
    build = next(p for p in torch_block.parts(replace(_TREE.target("cpu"), python_lock=None)) if p.stage == "build")
    lines = [line for line in build.post if line.startswith(("set --", "case ", "pip install --no-cache-dir torch"))]
    assert len(lines) == 3
    script = "\n".join(["set -eu", "pip() { printf '%s|' \"$@\"; echo; }", *lines])
    index = "https://download.pytorch.org/whl/cpu"
    for down, expected in (
        ("", f"--extra-index-url|{index}|"),
        (f"http://other {index}", ""),
        ("http://other", f"--extra-index-url|{index}|"),
    ):
        result = subprocess.run(
            ["sh", "-c", script],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "HPCML_PIP_INDEXES_DOWN": down},
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[-1] == f"install|--no-cache-dir|torch==2.13.0|{expected}"
        assert ("leaving out" in result.stdout) == (index in down)


# --- invariants every rendered file keeps ------------------------------------------------

FINAL_ONLY = {"environment", "test", "runscript", "labels", "help"}


@pytest.mark.parametrize("file", COMMITTED)
def test_one_section_of_each_kind_per_stage(file):
    for stage in stages_of(file):
        kinds = [(s.name, s.args) for s in stage.sections]
        assert len(kinds) == len(set(kinds)), f"{file}/{stage.header['Stage']}: {kinds}"
        if stage.header["Stage"] != "final":  # only the image's last stage keeps these
            assert not FINAL_ONLY & {s.name for s in stage.sections}


@pytest.mark.parametrize("file", COMMITTED)
def test_files_come_from_an_earlier_stage_and_never_land_in_tmp(file):
    seen = []
    for stage in stages_of(file):
        for sec in stage.sections:
            if sec.name == "files":
                if sec.args:
                    assert sec.args.split()[-1] in seen
                else:  # from the host: only the runtime wheel, by its build argument
                    assert sec.lines[0].startswith("{{ RUNTIME_WHEEL }} /opt/hpcml-runtime/"), sec.lines
                for line in filter(None, sec.lines):
                    dest = line.split()[-1]
                    assert not dest.startswith(("/tmp", "/var/tmp")), line
        seen.append(stage.header["Stage"])


@pytest.mark.parametrize("name", TARGETS)
def test_every_environment_line_is_a_quoted_export(name):
    for line in filter(None, section(name, "final", "environment").splitlines()):
        assert re.fullmatch(r"export [A-Za-z_][A-Za-z0-9_]*=('[^']*'|\"[^\"]*\"|[A-Za-z0-9_./:,=+@%-]+)", line), line


@pytest.mark.parametrize("name", TARGETS)
def test_labels_carry_provenance_and_the_resolved_recipe(tree, name):
    labels = dict(line.split(" ", 1) for line in section(name, "final", "labels").splitlines() if line)
    prefix = "org.hpc-ml-containers."
    assert labels[prefix + "target"] == name
    if tree.target(name).site_image:  # the base's torch: measured at build time, not pinned
        assert prefix + "version.torch" not in labels
    else:
        assert labels[prefix + "version.torch"] == tree.target(name).torch.version
    assert re.fullmatch(r"[0-9a-f]{64}", labels[prefix + "recipe.sha256"])
    assert json.loads(labels[prefix + "recipe"]) == tree.target(name).resolved


# --- frameworks: Lightning and Hugging Face in the top layer ------------------------------------

FRAMEWORK_PINS = "lightning==2.6.6 transformers==5.25.0 accelerate==1.16.0 datasets==5.2.0"
FRAMEWORK_TARGETS = ["cpu", "a100-cuda", "v100-cuda", "h100-cuda", "csc-cuda", "lumi-rocm"]
CONSTRAINTS = "/opt/venv/share/hpc-ml-runtime/constraints.txt"


def rendered_section(name, stage, kind):
    """A section of a target's stage as render makes it now (section() reads the committed files)."""
    for plan in plan_layers(_TREE, name).values():
        for found in deffile.split(plan.text):
            if found.header["Stage"] == stage and found.section(kind) is not None:
                return found.section(kind).body
    raise AssertionError(f"{name}: no stage {stage} with a %{kind}")


@pytest.mark.parametrize("name", FRAMEWORK_TARGETS)
def test_the_frameworks_are_installed_in_the_top_layer_and_checked(name):
    post = rendered_section(name, "build", "post")
    frameworks = post.index("echo '--- build: frameworks'")
    if isinstance(_TREE.target(name).python_lock, PythonLock):  # the lock's pins, resolved around DeepSpeed's
        assert "\nlightning==2.6.6 --hash=sha256:" in post[frameworks:]
        assert post.index('pip install --no-cache-dir --no-deps "$ds_tmp"/wheel/deepspeed-') < frameworks
    else:  # after DeepSpeed's wheel, so that pip resolves the frameworks around the pinned DeepSpeed
        assert f" -c {CONSTRAINTS} {FRAMEWORK_PINS}; then" in post
        assert post.index('pip install --no-cache-dir "$ds_tmp"/wheel/deepspeed-') < post.index(FRAMEWORK_PINS)
    assert f"python -m smoke.imports {FRAMEWORK_PINS}" in rendered_section(name, "final", "test").splitlines()
    for layer, plan in plan_layers(_TREE, name).items():  # never below: a bump rebuilds neither the OS nor torch
        assert ("lightning" in plan.text) == (layer == "image"), (name, layer)


FROZEN = f"pip list --format=freeze | grep -E '^[A-Za-z0-9._-]+==[^[:space:]]+$' > {CONSTRAINTS}"


@pytest.mark.parametrize("name", [n for n in FRAMEWORK_TARGETS if isinstance(_TREE.target(n).python_lock, PythonLock)])
def test_locked_frameworks_install_after_the_pins_of_the_layers_below_are_written(name):
    post = rendered_section(name, "build", "post")
    lines = post[post.index("echo '--- build: frameworks'") : post.index("echo '--- build: runtime'")].splitlines()
    installs = [line for line in lines if "pip install" in line]
    assert installs == ['pip install --no-cache-dir --no-deps --require-hashes -r "$lock"']
    assert lines.index(FROZEN) < lines.index(installs[0])  # smoke.pins still checks those in the image


@pytest.mark.parametrize("name", FRAMEWORK_TARGETS)
def test_the_frameworks_install_under_the_pins_of_the_layers_below_and_fail_in_one_line(name):
    """As a target without a lock installs them (pip resolving under the constraints)."""
    build = frameworks_block.parts(replace(_TREE.target(name), python_lock=None))[0]
    # after every block before it (DeepSpeed, the extras): the venv as they leave it is pinned
    lines = build.post
    frozen = FROZEN
    installs = [line for line in lines if "pip install" in line]  # one, under the constraints
    assert len(installs) == 1 and lines.index(frozen) < lines.index(installs[0])
    assert installs[0].startswith("if ! pip install --no-cache-dir --log ")
    assert installs[0].endswith(f" -c {CONSTRAINTS} {FRAMEWORK_PINS}; then")
    # pip refusing: one marked line naming the pins, and the layer stops
    failed = lines[lines.index(installs[0]) + 1 : lines.index("fi")]
    marked = [line for line in failed if contract.FAILURE_MARKER in line]
    assert len(marked) == 1 and f'then echo "{contract.FAILURE_MARKER}the frameworks need other versions' in marked[0]
    assert "(${pinned% })" in marked[0] and failed[-1].strip() == "exit 1"


@pytest.mark.parametrize("name", FRAMEWORK_TARGETS)
def test_the_images_test_runs_pip_check_and_compares_every_pin(name):
    test = rendered_section(name, "final", "test")
    block = test[test.index("--- test: frameworks") :].split("echo '--- test:", 1)[0]
    assert "\npip check\n" in block
    assert block.index(f"python -m smoke.imports {FRAMEWORK_PINS}") < block.index("pip check")
    assert block.index("pip check") < block.index(f"python -m smoke.pins {CONSTRAINTS}\n")


def test_a_target_can_go_without_the_frameworks_and_the_cpu_default_is_without(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    edit(recipes / "targets" / "lumi-rocm.yaml", "  venv: /opt/venv\n", "  venv: /opt/venv\n  frameworks: false\n")
    edit(recipes / "targets" / "cpu.yaml", "  frameworks: true ", "  # ")
    tree = RecipeTree(recipes)
    for name in ("lumi-rocm", "cpu"):
        texts = [plan.text for plan in plan_layers(tree, name).values()]
        assert not any("lightning" in text or "smoke.imports" in text for text in texts), name
    assert tree.target("a100-cuda").python.frameworks  # a GPU target has them unless it says no
