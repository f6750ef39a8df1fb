"""x86-64 compilers for an aarch64 image's DeepSpeed ops, on an x86-64 host.

Under QEMU every program of an aarch64 build runs emulated, the op compile's g++, cicc and
ptxas too (bench/cross_compile_bench.py measures how much slower). So for that build this
module makes a Debian root of the host's architecture holding GCC's cross compiler for
aarch64 and, for a CUDA image, NVIDIA's x86-64 nvcc of the image's cuda-toolkit release
(the same compiler version as the image's own), kept in the user's cache. The image layer's
build binds it at /mnt/cross, and the DeepSpeed step sources its enter.sh, which points CC,
CXX and CUDA_HOME at these compilers. They run natively and write aarch64 code against the
image's own headers and libraries. The same .def built on an aarch64 host finds no
/mnt/cross and compiles with the image's compilers.

    >>> root = ensure(tree.target("gh200-cuda"), progress)   # on an x86_64 host, as root
    >>> sorted(path.name for path in root.iterdir() if path.is_file())
    ['READY', 'enter.sh']
"""

import hashlib
import os
import shutil
import stat
import sys
import zipfile
from pathlib import Path

from .. import runner
from ..errors import ToolError
from . import cache, emulation, hostinfo

SUITE = "trixie"  # the images' Debian: its cross GCC is the image's GCC release
READY = "READY"
ENTER = "enter.sh"
WRAPPERS = "opt/hpcml/bin"  # CC and CXX (COMPILER_SCRIPT), three folders below the root
# the tags of NVIDIA's x86-64 wheels (pip takes only the tags it is given)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux2010_x86_64")
NVCC_PARTS = ("bin", "nvvm")  # of an nvidia/cu<major> wheel tree: the compilers, not headers
# Sourced by the DeepSpeed step with $cross set to where the root is bound. The root's x86-64
# programs find their loader and libraries at the paths of an x86-64 system, made as links
# in the build's (aarch64) root; nvcc finds include/ and lib/ beside its bin/, so its bin and
# nvvm are copied beside links to the image's own CUDA headers and libraries.
ENTER_SCRIPT = """\
# x86-64 compilers for {arch} (builder/host/cross_tools.py); sourced with $cross set
links="/lib64/ld-linux-x86-64.so.2 /usr/lib/x86_64-linux-gnu /usr/{arch}-linux-gnu/lib /usr/{arch}-linux-gnu/include"
for link in $links; do
    if [ -e "$link" ] && [ ! -L "$link" ]; then
        echo "hpcml-error: $link exists in the image; cannot link the x86-64 compilers there" >&2
        exit 1
    fi
done
mkdir -p /lib64 /usr/{arch}-linux-gnu
ln -sfn "$cross/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" /lib64/ld-linux-x86-64.so.2
ln -sfn "$cross/usr/lib/x86_64-linux-gnu" /usr/lib/x86_64-linux-gnu
# the cross C library's linker scripts name /usr/{arch}-linux-gnu/lib; its bin (x86-64 as and
# ld) stays out, where the image's own gcc would take it for its own
ln -sfn "$cross/usr/{arch}-linux-gnu/lib" /usr/{arch}-linux-gnu/lib
ln -sfn "$cross/usr/{arch}-linux-gnu/include" /usr/{arch}-linux-gnu/include
export CC="$cross/{wrappers}/{arch}-linux-gnu-gcc" CXX="$cross/{wrappers}/{arch}-linux-gnu-g++"
export LDSHARED="$CXX -shared"
if [ -n "${{CUDA_HOME:-}}" ] && [ -d "$cross/opt/cuda" ]; then
    cross_cuda="$(mktemp -d "${{ds_tmp:-/tmp}}/hpcml-cross-cuda-XXXXXX")"  # goes with the step's folder
    cp -a "$cross/opt/cuda/bin" "$cross/opt/cuda/nvvm" "$cross_cuda/"
    ln -s "$CUDA_HOME/include" "$cross_cuda/include"
    ln -s "$CUDA_HOME/lib" "$cross_cuda/lib"
    export CUDA_HOME="$cross_cuda"
fi
echo "compiling with x86-64 compilers for {arch}: $("$CXX" --version | head -n 1)"
"""
# CC and CXX: GCC's cross compiler with the build's own root as its system root (the image's
# headers and libraries, Python's too), LIBRARY_PATH searched as a native GCC does (a cross
# GCC ignores it), and the image's baseline CPU for "native": the build host's CPU says
# nothing about the nodes'
COMPILER_SCRIPT = """\
#!/bin/sh
# {name} for {arch} images (builder/host/cross_tools.py)
for arg; do
    shift
    case "$arg" in
        -march=native|-mcpu=native) arg=-march={baseline} ;;
    esac
    set -- "$@" "$arg"
done
IFS=:
for dir in ${{LIBRARY_PATH:-}}; do
    set -- "$@" "-L$dir"
done
exec "$(dirname "$0")/../../../usr/bin/{arch}-linux-gnu-{name}" --sysroot=/ "$@"
"""
BASELINE = {"aarch64": "armv8-a"}


# what the root installs: {arch}'s cross compiler, and Debian 13's QEMU (emulation.use_newer)
PACKAGES = ("g++-{arch}-linux-gnu", "qemu-user")
QEMU = "usr/libexec/qemu-binfmt/{arch}-binfmt-P"  # its binfmt interpreter


def wanted(target) -> bool:
    """Whether a build of ``target`` here compiles its ops with these compilers."""
    return emulation.host_arch() == "x86_64" and target.arch in BASELINE and target.site_image is None


def state(arch: str) -> str:
    """One line for `doctor`: whether this host has the compilers for ``arch`` images."""
    if emulation.host_arch() != "x86_64" or arch not in BASELINE:
        return f"not used ({arch} images compile with their own compilers here)"
    made = sorted(path for path in (cache.cache_dir() / "cross").glob(f"{arch}-*") if (path / READY).is_file())
    if made:
        return f"made: {made[-1]}"
    if os.geteuid() != 0:
        return "not made, and only root can make them: the ops of such images compile emulated (slower)"
    return "not made yet: the first build of such an image makes them (about a minute)"


def prepare(target, progress):
    """Before an emulated build of ``target`` runs anything: the root, and its QEMU registered
    ahead of the host's (None, and the host's QEMU, where ``ensure`` makes none)."""
    root = ensure(target, progress)
    if root is not None:
        emulation.use_newer(target.arch, root / QEMU.format(arch=target.arch))
    return root


def ensure(target, progress):
    """The root for ``target`` (made once, then from the cache), or None where the build
    compiles emulated: not wanted, or not root (debootstrap and chroot need it)."""
    if not wanted(target):
        return None
    if os.geteuid() != 0:
        progress.step("DeepSpeed's ops compile under emulation (slower): x86-64 compilers need root to make")
        return None
    kit = target.cuda_toolkit
    pins = f"cuda-toolkit[nvcc]=={kit.version}" if kit and kit.source == "pypi" else ""
    inputs = (SUITE, target.arch, pins, *PACKAGES, ENTER_SCRIPT, COMPILER_SCRIPT)
    key = hashlib.sha256("\n".join(inputs).encode()).hexdigest()
    root = cache.cache_dir() / "cross" / f"{target.arch}-{key[:16]}"
    if (root / READY).is_file():
        progress.step(f"x86-64 compilers for {target.arch} from the cache ({root})")
        return root
    progress.step(f"making x86-64 compilers for {target.arch} ({root}; a few minutes, once)")
    work = root.with_name(f".{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    try:
        _make(work, target.arch, pins)
        for stale in root.parent.glob(f"{target.arch}-*"):  # one root per arch: older ones go
            shutil.rmtree(stale, ignore_errors=True)
        os.replace(work, root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return root


def _make(work: Path, arch: str, pins: str):
    runner.run(["debootstrap", "--variant=minbase", SUITE, str(work), hostinfo.debian_mirror()], timeout=1800)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    runner.run(["chroot", str(work), "apt-get", "update"], env=env, timeout=900)
    install = ["apt-get", "install", "-y", "--no-install-recommends", *(p.format(arch=arch) for p in PACKAGES)]
    runner.run(["chroot", str(work), *install], env=env, timeout=1800)
    runner.run(["chroot", str(work), "apt-get", "clean"], env=env)
    (work / WRAPPERS).mkdir(parents=True)
    for name in ("gcc", "g++"):
        script = COMPILER_SCRIPT.format(name=name, arch=arch, baseline=BASELINE[arch])
        _write_executable(work / WRAPPERS / f"{arch}-linux-gnu-{name}", script)  # the names nvcc knows
    if pins:
        _add_nvcc(work, pins)
    (work / ENTER).write_text(ENTER_SCRIPT.format(arch=arch, wrappers=WRAPPERS))
    (work / READY).write_text(pins + "\n")


def _add_nvcc(work: Path, pins: str):
    """NVIDIA's x86-64 nvcc and cicc of the release ``pins`` names, in work/opt/cuda."""
    wheels = work / "tmp" / "wheels"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    platforms = [word for tag in PLATFORMS for word in ("--platform", tag)]
    download = ["--only-binary=:all:", *platforms, "--python-version", python, "-d", str(wheels), pins]
    runner.run([sys.executable, "-m", "pip", "download", "--quiet", *download], timeout=1800)
    target = work / "opt" / "cuda"
    for wheel in sorted(wheels.glob("nvidia_*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                parts = Path(member.filename).parts  # nvidia/cu13/bin/nvcc
                if len(parts) < 4 or parts[0] != "nvidia" or parts[2] not in NVCC_PARTS or member.is_dir():
                    continue
                path = target.joinpath(*parts[2:])
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(archive.read(member))
                path.chmod(0o755 if "bin" in parts[2:-1] else 0o644)  # bin/nvcc, nvvm/bin/cicc
    shutil.rmtree(wheels)
    if not (target / "bin" / "nvcc").is_file():
        raise ToolError(f"pip download {pins} brought no x86-64 nvcc")


def _write_executable(path: Path, text: str):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
