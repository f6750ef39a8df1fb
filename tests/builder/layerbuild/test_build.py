"""Real builds with Apptainer (installed, or the toolbox the builder provisions as root).

The CPU image is built into a fresh images directory; its layers come from the user's layer
cache when this machine built them before (a clean machine builds them from scratch, about
27 minutes on 2 cores). Fault tests build small definitions on top of its base layer and
kill or break them midway.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import RECIPES, ROOT, run_builder, wait_until
from helpers import x86_code
from helpers.layer_build import start_layer_build

from builder.host.hostinfo import debian_mirror
from builder.layerbuild.store import layer_keys
from builder.recipes.tree import RecipeTree
from builder.render.definition import render_all

IMAGES = None  # set by the images fixture


@pytest.fixture(autouse=True)
def _images(cpu_image):
    global IMAGES
    IMAGES = cpu_image.parent


def run(argv, **kwargs):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, **kwargs)


def test_second_build_is_up_to_date_and_touches_nothing(cpu_image):
    before = {p.name: p.stat().st_mtime_ns for p in IMAGES.glob("cpu*.sif")}
    result = run_builder("build", "cpu", "--images", IMAGES)
    assert result.returncode == 0 and f"{cpu_image} is up to date" in result.stdout
    assert {p.name: p.stat().st_mtime_ns for p in IMAGES.glob("cpu*.sif")} == before
    assert not list(IMAGES.glob(".*tmp-*"))


# Rebuilds the image the session already built (4 min of `make test` here), so it runs in
# `make test-full`; test_layers.py holds the same plan with a fake runner in `make test`.
@pytest.mark.full
def test_force_rebuilds_the_top_layer_only(cpu_image):
    lower = {p.name: p.stat().st_mtime_ns for p in IMAGES.glob("cpu.*.sif")}
    image = cpu_image.stat().st_mtime_ns
    result = run_builder("build", "cpu", "--images", IMAGES, "--force", timeout=1200)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    progress = result.stdout + result.stderr
    assert f"devel layer {IMAGES / 'cpu.devel.sif'} is up to date" in progress
    assert f"base layer {IMAGES / 'cpu.base.sif'} is up to date" in progress
    assert f"building the image layer {IMAGES / 'cpu.sif'}" in progress
    log = (IMAGES / "cpu.image.build.log").read_text()
    assert "reusing deepspeed-wheel, kept from a build with the same inputs" in log
    assert {p.name: p.stat().st_mtime_ns for p in IMAGES.glob("cpu.*.sif")} == lower
    assert cpu_image.stat().st_mtime_ns != image


def test_force_takes_top_or_all_and_nothing_else(tmp_path):
    result = run_builder("build", "cpu", "--images", tmp_path, "--force=most")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert "--force: invalid choice: 'most' (choose from 'top', 'all')" in result.stderr
    assert not list(tmp_path.iterdir())


def test_layers_are_separate_images(cpu_image):
    names = sorted(p.name for p in IMAGES.glob("cpu*.sif"))
    assert names == ["cpu.base.sif", "cpu.devel.sif", "cpu.sif"]
    # compilers stay in the devel layer
    assert os.path.getsize(IMAGES / "cpu.sif") < os.path.getsize(IMAGES / "cpu.devel.sif")


def test_image_runs_torch_deepspeed_ops_and_mpi4py(apptainer, cpu_image):
    code = (
        "import torch, deepspeed, mpi4py, numpy, torch.distributed as d; "
        "print(torch.__version__, deepspeed.__version__, mpi4py.__version__, d.is_gloo_available())"
    )
    result = run([apptainer, "exec", cpu_image, "python", "-c", code])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2.13.0+cpu", "0.19.8", "4.1.2", "True"]


def _ds_report_rows(apptainer, image):
    """{op: installed} as the image's ds_report prints it."""
    report = run([apptainer, "exec", image, "ds_report"]).stdout
    rows = re.findall(r"^(\w+) \.* ?\[(YES|NO)\]", re.sub(r"\x1b\[[0-9;]*m", "", report), re.M)
    return {op: installed == "YES" for op, installed in rows}


def test_labels_list_exactly_the_ops_ds_report_shows_installed(apptainer, cpu_image):
    result = run([apptainer, "inspect", "--labels", "--json", cpu_image])
    labels = json.loads(result.stdout)["data"]["attributes"]["labels"]
    labelled = labels["org.hpc-ml-containers.deepspeed.ops"].split(",")
    rows = _ds_report_rows(apptainer, cpu_image)
    assert sorted(op for op, yes in rows.items() if yes) == sorted(labelled)
    # the shared-memory comm op the engine loads at start and the CPU FusedAdam (issue 11)
    assert {"deepspeed_shm_comm", "fused_adam", "pin_memory", "cpu_adam"} <= set(labelled)
    # every op DeepSpeed lists for the CPU accelerator is either prebuilt or skipped with a reason
    ds = RecipeTree(RECIPES).target("cpu").deepspeed
    assert sorted(rows) == sorted(ds.listed)
    assert set(rows) - set(labelled) == {op for op, _ in ds.skipped} | {"deepspeed_not_implemented"}
    # and `show` says the same
    shown = run_builder("show", "cpu").stdout
    assert "promised_ops:\n" + "".join(f"  - {op}\n" for op in labelled) in shown


def test_image_test_section_passes_again(apptainer, cpu_image):
    result = run([apptainer, "test", cpu_image])
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert re.search(r"^deepspeed engine +PASS +8 engines", result.stdout, re.M), result.stdout[-3000:]
    assert re.search(r"^deepspeed ops +PASS", result.stdout, re.M)


# The smallest DeepSpeed training script a new user writes (issue 11), at each ZeRO stage; the
# image has no compiler, so any op missing from the wheel fails it (`c++: not found`).
USER_SCRIPT = """
import os, sys, torch, deepspeed
for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": sys.argv[2], "RANK": "0",
             "WORLD_SIZE": "1", "LOCAL_RANK": "0"}.items():
    os.environ.setdefault(k, v)
deepspeed.init_distributed(dist_backend="gloo")
model = torch.nn.Linear(8, 2)
zero = {"stage": int(sys.argv[1])}
if len(sys.argv) > 3:
    zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
cfg = {"train_batch_size": 4, "optimizer": {"type": "Adam", "params": {"lr": 1e-3}},
       "zero_optimization": zero}
engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
loss = engine(torch.randn(4, 8)).sum(); engine.backward(loss); engine.step()
print("STEP DONE", type(opt).__name__)
"""


@pytest.mark.parametrize("zero", ["1", "2", "3", "3-offload"])
def test_a_users_deepspeed_script_trains_without_compiling(apptainer, cpu_image, tmp_path, zero):
    extensions = tmp_path / "torch-extensions"
    extensions.mkdir()
    port = str(29600 + len(zero) * 7 + int(zero[0]))
    result = run(
        [
            apptainer,
            "exec",
            "--env",
            f"TORCH_EXTENSIONS_DIR={extensions}",
            cpu_image,
            "python",
            "-c",
            USER_SCRIPT,
            zero[0],
            port,
            *(["offload"] if "offload" in zero else []),
        ]
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "STEP DONE" in result.stdout
    assert "Error building extension" not in result.stdout + result.stderr
    assert not list(extensions.iterdir())  # nothing was compiled just in time


def test_no_prebuilt_op_needs_avx512(apptainer, cpu_image, tmp_path):
    """The ops are compiled for x86-64's AVX2 baseline, not for this build host's AVX-512: the
    image's ops would die with SIGILL on LUMI's EPYC 7A53 (Zen 3) and most laptops."""
    ops = x86_code.copy_ops(apptainer, cpu_image, tmp_path)
    found = {op.name.split(".")[0]: x86_code.counts(op) for op in ops}
    assert {"cpu_adam_op", "cpu_adagrad_op", "cpu_lion_op", "deepspeed_shm_comm_op"} <= set(found)
    assert x86_code.unguarded_avx512(ops) == {}  # the comm op picks its AVX-512 kernels at run time
    assert found["cpu_adam_op"]["avx"] > 0  # still vectorized, with AVX2's ymm registers


def test_labels_embed_the_resolved_recipe(apptainer, cpu_image):
    result = run([apptainer, "inspect", "--labels", "--json", cpu_image])
    labels = json.loads(result.stdout)["data"]["attributes"]["labels"]
    recipe = json.loads(labels["org.hpc-ml-containers.recipe"])
    assert recipe == RecipeTree(RECIPES).target("cpu").resolved
    assert labels["org.hpc-ml-containers.version.deepspeed"] == "0.19.8"


def test_nothing_of_the_build_host_stays_in_the_image(apptainer, cpu_image):
    result = run(
        [apptainer, "exec", "--cleanenv", cpu_image, "sh", "-c", "ls -A /mnt; env; ls /opt/venv.new 2>&1 || true"]
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert not any(line.startswith(("PIP_", "SSL_CERT_FILE", "hpcml-build-host")) for line in lines)
    assert "ca.crt" not in lines
    assert "No such file or directory" in result.stdout  # the venv swap left no copy


def test_no_label_names_a_path_of_the_build_machine(apptainer, cpu_image):
    result = run([apptainer, "inspect", "--labels", "--json", cpu_image])
    labels = json.loads(result.stdout)["data"]["attributes"]["labels"]
    # Apptainer records the From: line; the parent layer goes by its file name
    assert labels["org.label-schema.usage.singularity.deffile.from"] == "cpu.base.sif"
    folders = {str(cpu_image.parent), str(cpu_image.parent.resolve()), str(ROOT), str(Path.home())}
    assert not [(name, value) for name, value in labels.items() if any(f in value for f in folders)], labels
    # nor the Debian mirror the build host's apt uses (the layers below record it)
    mirror = debian_mirror()
    assert not [(name, value) for name, value in labels.items() if mirror in value], labels
    assert "org.label-schema.usage.singularity.deffile.mirrorurl" not in labels


def test_a_top_component_change_keeps_the_os_and_torch_layers(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    before = layer_keys(render_all(RecipeTree(recipes).target("cpu")), {"MIRROR": "m"})
    versions = recipes / "versions.yaml"
    versions.write_text(versions.read_text().replace("deepspeed: 0.19.8", "deepspeed: 0.19.9"))
    lock = recipes / "locks" / "cpu" / "python.txt"  # as `hpcml lock cpu` would move it
    lock.write_text(lock.read_text().replace("deepspeed==0.19.8", "deepspeed==0.19.9"))
    after = layer_keys(render_all(RecipeTree(recipes).target("cpu")), {"MIRROR": "m"})
    assert before["devel"] == after["devel"] and before["base"] == after["base"]
    assert before["image"] != after["image"]
    versions.write_text(versions.read_text().replace("torch: 2.13.0", "torch: 2.14.0"))
    lock.write_text(lock.read_text().replace("torch==2.13.0", "torch==2.14.0"))
    last = layer_keys(render_all(RecipeTree(recipes).target("cpu")), {"MIRROR": "m"})
    assert len({last["devel"], after["devel"]}) == 2 and last["base"] != after["base"]


# --- faults: a broken or killed build leaves the previous image exactly as it was ------------


def work_dirs(tmp_path):
    """Whatever the build left in its TMPDIR: the builder's work dir, Apptainer's build dirs."""
    return sorted(p.name for p in (tmp_path / "tmp").iterdir())


def test_a_failing_build_reports_its_log_and_keeps_the_previous_image(tiny_image, tmp_path):
    process, images, previous = start_layer_build(tmp_path, "echo breaking-now\nexit 3", base=tiny_image)
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 1
    assert "apptainer build failed" in stderr and "x.build.log" in stderr and "breaking-now" in stderr
    assert previous.read_bytes() == b"the previous image\n"
    assert sorted(p.name for p in images.iterdir()) == ["x.build.log", "x.sif"]
    assert work_dirs(tmp_path) == []


def test_a_kept_step_runs_once_and_a_silent_index_is_never_retried(cpu_image, tmp_path):
    """Two builds of one small layer: the first runs the kept step, then fails later on, and
    still stores the step's output; the second puts it back and succeeds. pip is given an
    index on a closed loopback port each time."""
    from builder.host import cache
    from builder.render.blocks import build_host
    from builder.render.blocks.torch import extra_index
    from builder.render.definition import _kept_step
    from builder.render.parts import Kept

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        silent = f"http://127.0.0.1:{sock.getsockname()[1]}/simple"
    kept = Kept(
        name="probe",
        build=(f"echo made-by-{tmp_path.name} > /made.txt",),
        save=('cp /made.txt "$kept/"',),
        restore=('cp "$kept/made.txt" /made.txt',),
    )
    settings = build_host.parts(None)[0].post  # as every rendered %post starts
    folder, kept_lines = _kept_step(kept, ["test"])
    post = "\n".join(
        [
            *settings,
            *kept_lines,
            *extra_index(silent),
            '/opt/venv/bin/pip download --no-deps -d /tmp/none --index-url file:///nowhere "$@" six || true',
        ]
    )
    private = tmp_path / "cache"
    box = cache.cache_dir() / "toolbox"
    if box.is_dir():  # the toolbox is set-up, not what this test is about
        (private / "hpc-ml-containers").mkdir(parents=True)
        (private / "hpc-ml-containers" / "toolbox").symlink_to(box)
    env = {"XDG_CACHE_HOME": str(private)}
    logs = []
    for later, status in (("echo a-later-step-breaks; exit 3", 1), ("true", 0)):
        process, images, _previous = start_layer_build(
            tmp_path,
            f"{post}\n{later}",
            "--uncompressed",
            f"--kept={folder}",
            f"--index={silent}",
            base=IMAGES / "cpu.base.sif",  # its pip meets the silent index
            env=env,
        )
        _, stderr = process.communicate(timeout=900)
        assert process.returncode == status, stderr
        assert f"pip index {silent} does not answer" in stderr
        logs.append((images / "x.build.log").read_text())
    first, second = logs
    assert f"made-by-{tmp_path.name}" in first and "reusing probe" not in first
    assert "a-later-step-breaks" in first
    assert "reusing probe, kept from a build with the same inputs" in second
    for log in logs:
        assert f"leaving out {silent}" in log and "Retrying" not in log
    stored = list((private / "hpc-ml-containers" / "kept").glob("probe-*/made.txt"))
    assert [p.read_text() for p in stored] == [f"made-by-{tmp_path.name}\n"]


def squashfs_flags(sif: Path) -> int:
    """The flags of the SIF's squashfs superblock (its magic, then flags at byte 24)."""
    with open(sif, "rb") as handle:
        head = handle.read(1 << 20)
    start = head.index(b"hsqs")
    return int.from_bytes(head[start + 24 : start + 26], "little")


UNCOMPRESSED_INODES, UNCOMPRESSED_DATA, UNCOMPRESSED_FRAGMENTS = 0x1, 0x2, 0x8


@pytest.mark.parametrize("way", ["uncompressed", "packed"])
def test_intermediate_layers_are_written_uncompressed_and_the_image_packed(tiny_image, tmp_path, way):
    process, _images, previous = start_layer_build(
        tmp_path,
        "echo layer > /layer.txt",
        *(["--uncompressed"] if way == "uncompressed" else []),
        base=tiny_image,
    )
    _, stderr = process.communicate(timeout=900)
    assert process.returncode == 0, stderr
    flags = squashfs_flags(previous)
    raw = UNCOMPRESSED_INODES | UNCOMPRESSED_DATA | UNCOMPRESSED_FRAGMENTS
    assert (flags & raw == raw) if way == "uncompressed" else (flags & raw == 0), hex(flags)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_a_killed_build_leaves_the_previous_image_and_no_temp_files(tiny_image, tmp_path, sig):
    process, images, previous = start_layer_build(tmp_path, "echo post-started\nsleep 600", base=tiny_image)
    log = images / "x.build.log"
    assert wait_until(lambda: log.exists() and "post-started" in log.read_text(errors="replace"), 300)
    process.send_signal(sig)
    process.wait(timeout=180)  # generous: make test's other stream may hold both cores
    # the guard stops apptainer and removes the temporary image and work files
    assert wait_until(lambda: not [p for p in images.iterdir() if "tmp" in p.name] and work_dirs(tmp_path) == [], 60)
    assert previous.read_bytes() == b"the previous image\n"
    assert run(["pgrep", "-f", str(tmp_path / "x.def")]).stdout == ""


def test_build_of_an_unknown_target_lists_the_valid_ones(tmp_path):
    result = run_builder("build", "nosuch", "--images", tmp_path)
    assert result.returncode == 2 and "expected one of: a100-cuda, cpu, csc-cuda" in result.stderr
    assert "puhti-cuda" in result.stderr  # aliases are names too


def test_an_unreachable_mirror_fails_with_the_log_and_writes_no_image(tmp_path):
    result = run_builder(
        "build", "cpu", "--images", tmp_path, env={"HPCML_MIRROR": "http://127.0.0.1:9/debian"}, timeout=600
    )
    # the Debian lock's drift check asks the mirror first: one line, before any layer is begun
    assert result.returncode == 1
    assert "apt-get update: no index for amd64 of bookworm from http://127.0.0.1:9/debian, " in result.stderr
    assert "bookworm-security from http://127.0.0.1:9/debian-security: " in result.stderr  # beside the mirror
    assert "Traceback" not in result.stderr and "cpu.devel.build.log" not in result.stderr
    assert not list(tmp_path.glob("*.sif")) and not list(tmp_path.glob(".*tmp-*"))


def test_doctor_reports_runtime_and_fakeroot(cpu_image):
    result = run_builder("doctor")
    assert result.returncode == 0, result.stderr
    assert "apptainer version" in result.stdout and "fakeroot" in result.stdout


@pytest.mark.parametrize("accelerator, target", [("cpu", "cpu"), ("cuda", "v100-cuda")])
def test_the_op_catalogue_is_deepspeeds_own_list(apptainer, cpu_image, accelerator, target):
    """recipes/deepspeed-ops.yaml against the op builders of the image's real DeepSpeed, for the
    CPU accelerator and the CUDA one (which ROCm images use too); no GPU is needed to list them."""
    result = run(
        [
            apptainer,
            "exec",
            "--env",
            f"DS_ACCELERATOR={accelerator}",
            cpu_image,
            "python",
            "-c",
            "from deepspeed.ops.op_builder.all_ops import ALL_OPS; print(' '.join(sorted(ALL_OPS)))",
        ]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == list(RecipeTree(RECIPES).target(target).deepspeed.listed)
