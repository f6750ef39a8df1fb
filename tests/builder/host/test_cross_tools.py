"""host.cross_tools: the x86-64 compilers an aarch64 build takes on an x86-64 host, made with a
fake runner (what it runs, what it writes, the cache), and its compiler scripts run for real
by sh. tests/images/test_cross_compile.py compiles with the real ones in an aarch64 image."""

import io
import os
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import RECIPES

from builder import runner
from builder.host import cross_tools, emulation, hostinfo
from builder.recipes.tree import RecipeTree

MIRROR = "http://deb.example.org/debian"


class Steps:
    def __init__(self):
        self.lines = []

    def step(self, text):
        self.lines.append(text)


def _wheel(path: Path, files: dict):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    path.write_bytes(buffer.getvalue())


@pytest.fixture
def made(monkeypatch, tmp_path):
    """ensure() on an x86_64 host as root, with every command recorded and pip's download
    writing two small x86-64 wheels."""
    commands = []

    def run(argv, *, input=None, cwd=None, env=None, check=True, timeout=None):
        argv = [str(a) for a in argv]
        commands.append(argv)
        if argv[:4] == [argv[0], "-m", "pip", "download"]:
            wheels = Path(argv[argv.index("-d") + 1])
            wheels.mkdir(parents=True)
            _wheel(wheels / "cuda_toolkit-13.2.2-py2.py3-none-any.whl", {"cuda_toolkit/x": ""})
            nvcc = {"nvidia/cu13/bin/nvcc": "x86-64 nvcc", "nvidia/cu13/include/cuda.h": "header"}
            _wheel(wheels / "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.whl", nvcc)
            nvvm = {"nvidia/cu13/nvvm/bin/cicc": "cicc", "nvidia/cu13/nvvm/libdevice/libdevice.10.bc": "bc"}
            _wheel(wheels / "nvidia_nvvm-13.0.88-py3-none-manylinux2010_x86_64.whl", nvvm)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(runner, "run", run)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(emulation, "host_arch", lambda: "x86_64")
    monkeypatch.setattr(hostinfo, "debian_mirror", lambda: MIRROR)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    stale = tmp_path / "cache/hpc-ml-containers/cross/aarch64-0000000000000000"  # an older version's
    stale.mkdir(parents=True)
    steps = Steps()
    root = cross_tools.ensure(RecipeTree(RECIPES).target("gh200-cuda"), steps)
    return root, commands, steps


def test_only_an_image_of_another_arch_built_on_x86_64_takes_them(monkeypatch):
    tree = RecipeTree(RECIPES)
    monkeypatch.setattr(emulation, "host_arch", lambda: "x86_64")
    assert cross_tools.wanted(tree.target("gh200-cuda")) and not cross_tools.wanted(tree.target("cpu"))
    monkeypatch.setattr(emulation, "host_arch", lambda: "aarch64")  # there it compiles natively
    assert not cross_tools.wanted(tree.target("gh200-cuda"))


def test_the_root_is_a_debian_of_the_host_with_gccs_cross_compiler_and_nvcc_of_the_images_release(made):
    root, commands, _ = made
    assert commands[0] == ["debootstrap", "--variant=minbase", "trixie", commands[0][3], MIRROR]
    assert ["apt-get", "install", "-y", "--no-install-recommends", "g++-aarch64-linux-gnu", "qemu-user"] == commands[2][
        2:
    ]
    pip = commands[-1]
    assert pip[-1] == "cuda-toolkit[nvcc]==13.2.2" and "--only-binary=:all:" in pip
    assert [pip[i + 1] for i, word in enumerate(pip) if word == "--platform"][:2] == [
        "manylinux_2_28_x86_64",
        "manylinux_2_17_x86_64",
    ]
    # nvcc's programs, executable; its headers and libraries are the image's own (enter.sh)
    assert (root / "opt/cuda/bin/nvcc").stat().st_mode & 0o777 == 0o755
    assert (root / "opt/cuda/nvvm/bin/cicc").stat().st_mode & 0o777 == 0o755
    assert (root / "opt/cuda/nvvm/libdevice/libdevice.10.bc").stat().st_mode & 0o777 == 0o644
    assert not (root / "opt/cuda/include").exists() and not (root / "tmp/wheels").exists()
    enter = (root / "enter.sh").read_text()
    wrappers = "$cross/opt/hpcml/bin/aarch64-linux-gnu"
    assert f'export CC="{wrappers}-gcc" CXX="{wrappers}-g++"' in enter
    assert 'ln -s "$CUDA_HOME/include" "$cross_cuda/include"' in enter
    assert 'mktemp -d "${ds_tmp:-/tmp}/hpcml-cross-cuda-XXXXXX"' in enter  # removed with the step's folder
    assert (root / "READY").read_text() == "cuda-toolkit[nvcc]==13.2.2\n"
    assert [path.name for path in root.parent.iterdir()] == [root.name]  # the older root went


def test_a_second_build_takes_the_root_from_the_cache_and_runs_nothing(made, monkeypatch):
    root, commands, _ = made
    commands.clear()
    steps = Steps()
    assert cross_tools.ensure(RecipeTree(RECIPES).target("gh200-cuda"), steps) == root
    assert commands == [] and steps.lines == [f"x86-64 compilers for aarch64 from the cache ({root})"]


def test_without_root_the_ops_compile_emulated_and_the_build_says_so(monkeypatch):
    monkeypatch.setattr(emulation, "host_arch", lambda: "x86_64")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    steps = Steps()
    assert cross_tools.ensure(RecipeTree(RECIPES).target("gh200-cuda"), steps) is None
    assert steps.lines == ["DeepSpeed's ops compile under emulation (slower): x86-64 compilers need root to make"]


def test_the_compiler_script_passes_the_images_root_and_baseline_and_searches_library_path(made):
    root, _, _ = made
    real = root / "usr/bin/aarch64-linux-gnu-g++"  # a stand-in that prints what it was given
    real.parent.mkdir(parents=True, exist_ok=True)
    real.write_text('#!/bin/sh\nprintf "%s|" "$@"\n')
    real.chmod(0o755)
    env = dict(os.environ, LIBRARY_PATH="/stubs:/more")
    argv = [str(root / "opt/hpcml/bin/aarch64-linux-gnu-g++"), "-O3", "-march=native", "-c", "a b.cpp"]
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert result.stdout == "--sysroot=/|-O3|-march=armv8-a|-c|a b.cpp|-L/stubs|-L/more|", result.stderr
