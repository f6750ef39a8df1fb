"""How DeepSpeed's CUDA ops are compiled and linked in an image build (the deepspeed block's
lines before its compile): with no GPU driver, with the pip toolkit's libraries on their run
path, and each nvcc alone, so that two builds write the same ops."""

import re

from ..recipes.target_model import Target
from ..values.shell import cmd

# async_io links -lcuda (the driver) although it calls nothing in it. A build host has no
# driver, so an empty stub stands in for the link, and --as-needed keeps libcuda.so.1 out of
# the op's needs: otherwise the op would not load without a GPU (the image's %test).
_CUDA_LINK = (
    'mkdir -p "$ds_tmp/stubs"',
    'gcc -shared -Wl,-soname,libcuda.so.1 -o "$ds_tmp/stubs/libcuda.so" -x c /dev/null',
    'export LIBRARY_PATH="$ds_tmp/stubs${LIBRARY_PATH:+:$LIBRARY_PATH}"',
    "export LDFLAGS=-Wl,--as-needed",
)
# The pip toolkit's libraries (libcurand.so.10, which the transformer and inference ops need)
# stay in the venv's nvidia/cuNN/lib, where the loader does not look and which torch does not
# load since 2.15: the ops carry that folder as their run path, the venv's path in the image.
_PIP_TOOLKIT_RPATH = (
    'toolkit_lib="$(readlink -f "$CUDA_HOME")/lib" && export LDFLAGS="$LDFLAGS -Wl,-rpath,$toolkit_lib"',
)


# nvcc names internal-linkage symbols after its front end's process ID, and with -g writes
# its temporary files' paths: two builds' ops differed by those bytes (a100-cuda, 2026-12-07).
# Each nvcc runs in user, PID and mount namespaces of its own with a /tmp of its own: the same
# IDs and paths in every build, and no two compiles share a temporary name. DeepSpeed compiles
# without ninja, where torch calls $CUDA_HOME/bin/nvcc by its path (PYTORCH_NVCC is read by the
# ninja build alone): so CUDA_HOME becomes a folder of links to the toolkit's own files, but
# for bin/nvcc, a script that runs the toolkit's nvcc alone. Where namespaces are refused
# (proot, no user namespaces) nvcc runs as it is, and says so once.
_ALONE = "unshare --user --map-root-user --pid --mount --fork sh -c"
_OWN_TMP = 'mount -t tmpfs -o mode=1777 tmpfs /tmp && exec "$0" "$@"'
_SHADOW = '"$ds_tmp/cuda"'


def _literal(text: str) -> str:
    """``text`` in double quotes, every $ escaped: written as it is, where shellcheck asks why a
    $ in single quotes does not expand."""
    return '"' + re.sub(r'([\\"$`])', r"\\\1", text) + '"'


# the script's lines: its toolkit's nvcc named when it is written ($toolkit), the rest as it is
_NVCC_SCRIPT = " ".join(
    (_literal("#!/bin/sh"), _literal(f"exec {_ALONE} {cmd(_OWN_TMP)} ")[:-1] + '\\"$toolkit/bin/nvcc\\" \\"\\$@\\""')
)
_NVCC_ALONE = (
    f'toolkit="$CUDA_HOME" && mkdir -p {_SHADOW}/bin && for entry in "$toolkit"/* "$toolkit"/bin/*; do '
    f'case "${{entry#"$toolkit"/}}" in bin|bin/nvcc) ;; '
    f'*) ln -s "$entry" {_SHADOW}/"${{entry#"$toolkit"/}}" ;; esac; done',
    f"printf '%s\\n' {_NVCC_SCRIPT} > {_SHADOW}/bin/nvcc && "
    f"if {_ALONE} 'mount -t tmpfs tmpfs /tmp' 2>/dev/null; then chmod +x {_SHADOW}/bin/nvcc; "
    f"export CUDA_HOME={_SHADOW}; else echo 'nvcc runs without namespaces of its own here: "
    "the ops may differ from build to build'; fi",
)


def cuda_link(target: Target) -> tuple:
    """The lines before a CUDA op compile: the driver stub, the toolkit's run path, nvcc alone."""
    pip_toolkit = target.cuda_toolkit is not None and target.cuda_toolkit.source == "pypi"
    return (*_CUDA_LINK, *_PIP_TOOLKIT_RPATH * pip_toolkit, *_NVCC_ALONE)
