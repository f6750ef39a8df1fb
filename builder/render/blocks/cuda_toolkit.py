"""The nvcc that compiles DeepSpeed's CUDA ops, from a package index instead of a CUDA base image.

Two routes (the target's `cuda_toolkit`), both in the build stages only; the image runs on
the CUDA libraries of torch's wheels:

- `from: pypi, version: 13.2.2`: `cuda-toolkit[nvcc,cudart,curand,profiler]` from PyPI, the
  release the target's torch pins. curand: DeepSpeed's transformer, inference and random_ltd
  ops link -lcurand, which torch no longer brings since 2.15. profiler: cuda_profiler_api.h,
  which DeepSpeed's inference kernels include. CCCL's headers (CUB, Thrust) come as
  `nvidia-cuda-cccl` with no version: torch 2.15's NVSHMEM already brings a newer one than the
  toolkit's own extra names, a later step never moves what an earlier one installed, and CCCL
  supports the nvcc of its own and the previous CUDA major. pip puts the toolkit in
  site-packages/nvidia/cu13, where torch does not look, with no lib64 and only versioned
  libraries (libcudart.so.13, libcurand.so.10): the block links it to CUDA_HOME and adds the
  unversioned names `-lcudart` and `-lcurand` need. CUDA 13 compiles for sm_75 and newer only.
- `from: debian, gcc: "13"`: Debian's nvidia-cuda-toolkit from non-free (trixie: CUDA 12.4,
  sm_50 to sm_90, so V100 too). Its nvcc takes gcc 13 at most, trixie's default is 14, so the
  ops are compiled with the gcc named here.

Emits: "cuda_toolkit", build only (CUDA images): CUDA_HOME (and CC, CXX) for the later
compiles, and the toolkit's install lines or its Debian packages for the os block.
Reads: target.cuda_toolkit (from, version, gcc). No site fields: whether the toolkit compiles
for the sites' archs is the recipe's choice.

Example, recipes/targets/v100-cuda.yaml, `cuda_toolkit: {from: debian, gcc: "13"}`, renders
(containers/v100-cuda.devel.def; nvidia-cuda-toolkit and g++-13 go to the os block):

    echo '--- devel: cuda_toolkit'
    export CUDA_HOME=/usr
    export CC=gcc-13
    export CXX=g++-13
    nvcc --version
"""

from ...recipes.target_model import Target
from ..parts import Part
from ..pip_install import Request, lines

PIP_HOME = "/opt/cuda"  # a fixed path for the pip toolkit, whatever Python's version
_CCCL = "nvidia-cuda-cccl"  # any version: the one torch brings, else the newest
_EXTRAS = "nvcc,cudart,curand,profiler"
_UNVERSIONED = (
    'for so in {lib}/lib*.so.*; do [ -e "$so" ] || continue; name="${{so%%.so.*}}.so"; '
    '[ -e "$name" ] || ln -s "${{so##*/}}" "$name"; done'
)
_FIND_PIP_HOME = (
    "cuda_home=\"$(python -c 'import os, sys, nvidia; print(os.path.join(nvidia.__path__[0], sys.argv[1]))' {folder})\""
)


def parts(target: Target):
    kit = target.cuda_toolkit
    if kit is None:
        return []
    if kit.source == "pypi":
        major = kit.version.split(".")[0]
        post = (
            *lines(target, Request("cuda_toolkit", (f"cuda-toolkit[{_EXTRAS}]=={kit.version}", _CCCL))),
            _FIND_PIP_HOME.format(folder=f"cu{major}"),
            f'ln -sfn "$cuda_home" {PIP_HOME}',
            # -lcudart (torch's cpp_extension), -lcurand (DeepSpeed's ops) need these names
            _UNVERSIONED.format(lib=f"{PIP_HOME}/lib"),
            f"{PIP_HOME}/bin/nvcc --version",
        )
        return [Part(block="cuda_toolkit", stage="build", build_env=(("CUDA_HOME", PIP_HOME),), post=post)]
    compilers = (("CC", f"gcc-{kit.gcc}"), ("CXX", f"g++-{kit.gcc}")) if kit.gcc else ()
    return [
        Part(
            block="cuda_toolkit",
            stage="build",
            packages=("nvidia-cuda-toolkit", *(f"g++-{kit.gcc}",) * bool(kit.gcc)),
            build_env=(("CUDA_HOME", "/usr"), *compilers),
            post=("nvcc --version",),
        )
    ]
