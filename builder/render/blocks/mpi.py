"""The distribution's MPI (same ABI as the site's) and mpi4py's binary wheel, which loads it.

mpi4py's wheels (4.1 and later) carry one extension per MPI ABI (Open MPI's, MPICH's) and load
the one matching the libmpi found at import: the image's, or the site's that the wrapper binds
in for multi-node jobs (compiling mpi4py cost five minutes of a fresh build, for nothing). An
image with its own libfabric (comm.libfabric: cxi) may build MPICH on it instead (mpi.source):
ch4:ofi, so that MPI traffic takes Slingshot's CXI provider, as LUMI AI Factory's images do;
the distribution's mpich is built on UCX, which has no Slingshot transport.

Emits: "mpi", build (the MPI packages for the os block, or a kept step that compiles MPICH
into /opt/mpich; mpi4py's wheel) and final (the MPI packages or /opt/mpich; a %test that
mpi4py loads the expected MPI, and for MPICH from source, its version; for MPICH with HIP, its
GPU settings in %environment and a %test that MPICH reads them back, smoke.mpicvars).
Reads: target.mpi.abi (openmpi or mpich; must be every site's `mpi: abi:`, site.mpi.abi, as the
recipe tree checks), .mpi4py (true: the versions.yaml python_packages pin; "" for none), .source
(a versions.yaml source with its submodules; without it, as in cpu.yaml, the distribution's
package), target.torch.flavour (rocm: MPICH's HIP support, switched on).

Example, recipes/targets/lumi-rocm.yaml, `mpi: {abi: mpich, mpi4py: true, source: mpich}` (MPICH
5.0.1 with its hwloc and json-c; site lumi: `mpi: abi: mpich`), renders
(containers/lumi-rocm.devel.def, then lumi-rocm.def; shortened):

    echo '--- devel: mpi'
    kept=/mnt/kept/mpich-...
    ...
        ./configure --prefix=/opt/mpich ... --with-device=ch4:ofi --with-libfabric=/opt/libfabric ...
    ...
    pip install --no-cache-dir --only-binary=mpi4py mpi4py==4.1.2
    ...
    export MPIR_CVAR_ENABLE_GPU=1                 (in %environment, with the two HMEM settings)
    ...
    echo '--- test: mpi'
    python -c '...' 'MPICH Version:      5.0.1'
    python -m smoke.mpicvars MPIR_CVAR_ENABLE_GPU=1 MPIR_CVAR_CH4_OFI_ENABLE_HMEM=1 ...
"""

import re

from ...recipes.target_model import Target
from ...values.shell import cmd, python_check, register_libraries
from .. import git_sources
from ..parts import Kept, Part
from ..pip_install import Request, lines
from . import libfabric

PACKAGES = {"openmpi": ("openmpi-bin",), "mpich": ("mpich",)}
LIBRARY_NAME = {"openmpi": "Open MPI", "mpich": "MPICH"}

# MPI_Get_library_version may be called before MPI_Init, so the check needs no launcher.
_MPI4PY_CHECK = """
import sys
import mpi4py
mpi4py.rc.initialize = False
from mpi4py import MPI
found = MPI.Get_library_version()
assert sys.argv[1] in found, f"mpi4py uses {found.splitlines()[0]!r}, expected {sys.argv[1]}"
print("mpi4py", mpi4py.__version__, "on", found.splitlines()[0])
"""


MPICH_PREFIX = "/opt/mpich"
MPICH_LD_CONF = "/etc/ld.so.conf.d/hpcml-mpich.conf"
# what MPICH's autogen.sh and its compile need, besides the sources' own
MPICH_BUILD_PACKAGES = ("autoconf", "automake", "libtool", "make", "g++", "perl", "python3")
# MPICH's GPU support for the image's GPUs (LAIF configures --with-hip=/opt/rocm)
MPICH_GPU_OPTIONS = {"rocm": ("--with-hip=/opt/rocm", "--without-cuda")}
# ... and switched on, as LAIF's MPICH images set it (laifs-container-recipes
# containerfiles/mpich/Ubuntu_Rocm_Slingshot at c4035a7, read 2026-11-28): GPU buffers go to
# libfabric as device memory (HMEM) and are registered with the NIC (MR_HMEM) instead of being
# staged through host memory. MPICH 5.0.1's own defaults: ENABLE_GPU 1, HMEM 0, MR_HMEM -1.
# Not LAIF's FI_HMEM_DISABLE_P2P=1: that is for one-node runs without GPUs, and would stop
# peer-to-peer GPU transfers in every job of a GPU image.
MPICH_GPU_ENV = {
    "rocm": (
        ("MPIR_CVAR_ENABLE_GPU", "1"),
        ("MPIR_CVAR_CH4_OFI_ENABLE_HMEM", "1"),
        ("MPIR_CVAR_CH4_OFI_ENABLE_MR_HMEM", "1"),
    )
}


def parts(target: Target):
    source = target.mpi.source
    post, test = (), ()
    if target.mpi.mpi4py:
        # never the sdist: a missing wheel should fail here, not start a compile
        post = tuple(lines(target, Request("mpi", (f"mpi4py=={target.mpi.mpi4py}",), ("--only-binary=mpi4py",))))
        # the version line of MPICH's MPI_Get_library_version (src/mpi/init/initinfo.c)
        expected = f"MPICH Version:      {source.version}" if source else LIBRARY_NAME[target.mpi.abi]
        test = (python_check("python", _MPI4PY_CHECK, expected),)
    if source is None:
        packages = PACKAGES[target.mpi.abi]
        return [
            Part(block="mpi", stage="build", packages=packages, post=post),
            Part(block="mpi", stage="final", packages=packages, test=test),
        ]
    register = register_libraries(MPICH_LD_CONF, f"{MPICH_PREFIX}/lib")
    kept = Kept(
        name="mpich",
        build=_mpich_lines(source, MPICH_GPU_OPTIONS.get(target.torch.flavour, ())),
        save=(f'cp -a {MPICH_PREFIX}/. "$kept/mpich"',),
        restore=(f'cp -a "$kept/mpich" {MPICH_PREFIX}',),
    )
    gpu_env = MPICH_GPU_ENV.get(target.torch.flavour, ())
    return [
        Part(
            block="mpi",
            stage="build",
            packages=(*git_sources.PACKAGES, *MPICH_BUILD_PACKAGES),
            kept=kept,
            post=register + post,
            git_sources=git_sources.urls(source),
        ),
        Part(
            block="mpi",
            stage="final",
            copy_from_build=(MPICH_PREFIX,),
            post=register,
            env=gpu_env,
            test=test + _settings_check(gpu_env),
        ),
    ]


def _settings_check(env) -> tuple:
    """%test: MPICH itself reads the settings back (MPI_T), so a name it does not know fails."""
    if not env:
        return ()
    return (cmd("python", "-m", "smoke.mpicvars", *(f"{name}={value}" for name, value in env)),)


def _mpich_lines(source, gpu_options) -> tuple:
    """MPICH's compile on the image's libfabric (libfabric block), in a work folder removed after."""
    work = '"$work"'
    return (
        'work="$(mktemp -d /tmp/hpcml-mpich-XXXXXX)"',
        *git_sources.checkout(source, f"{work}/mpich"),
        f"cd {work}/mpich",
        *_release_so_version(source.version),
        # neither the bundled UCX nor the bundled libfabric is built; the image has its own
        "./autogen.sh -without-ucx -without-ofi -without-fortran",
        # LAIF's options (containerfiles/mpich/Ubuntu_Rocm_Slingshot), but the prefix, and
        # xpmem, which these images do not carry
        cmd(
            "./configure",
            f"--prefix={MPICH_PREFIX}",
            "--disable-fortran",
            "--enable-fast=O3",
            "--enable-threads=multiple",
            "--with-device=ch4:ofi",
            f"--with-libfabric={libfabric.LIBFABRIC_PREFIX}",
            *gpu_options,
            "--without-ucx",
        ),
        'make -j"$(nproc)"',
        "make install",
        "cd /",
        f"rm -rf {work}",
        f"rm -f {MPICH_PREFIX}/lib/*.la",
    )


def _release_so_version(version) -> tuple:
    """A git tree builds libmpi.so.0 (libtool version 0:0:0), which mpi4py's wheel does not
    load as MPICH (it looks for libmpi.so.12). MPICH's release script writes the release's
    libtool version into maint/version.m4, whose comment names it ('# last version 5.0.1 -
    18:1:6'): these lines do the same, and stop the build when the comment is missing."""
    pattern = rf"s/^# last version {re.escape(version)} - \([0-9]*:[0-9]*:[0-9]*\)$/\1/p"
    missing = cmd(f"mpich: maint/version.m4 names no libtool version for {version}")
    return (
        f'so_version="$(sed -n {cmd(pattern)} maint/version.m4)"',
        f'test -n "$so_version" || {{ echo {missing} >&2; exit 1; }}',
        'sed -i "s/\\[libmpi_so_version_m4\\],\\[0:0:0\\]/[libmpi_so_version_m4],[$so_version]/" maint/version.m4',
    )
