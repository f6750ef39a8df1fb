"""The collective library: gloo (CPU), NCCL as torch ships it (CUDA), or RCCL with the
aws-ofi-nccl network plugin for Slingshot (ROCm)."""

from ...shell import cmd, python_check
from ..parts import Kept, Part

PLUGIN_PREFIX = "/opt/aws-ofi-nccl"
ROCM_RCCL = "/opt/rocm/lib/librccl.so.1"
LD_CONF = "/etc/ld.so.conf.d/hpcml-rccl.conf"

_NCCL_CHECK = """
import torch
version = torch.cuda.nccl.version()
print("NCCL", ".".join(map(str, version)) if isinstance(version, tuple) else version)
"""

# Loading with RTLD_NOW resolves every symbol at once: a plugin built against the wrong
# libfabric or HIP fails here instead of silently falling back to TCP sockets at run time.
_PLUGIN_CHECK = """
import ctypes, os, sys
plugin, rccl_prefix = sys.argv[1:3]
ctypes.CDLL(plugin, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
import torch
loaded = sorted({line.split()[-1] for line in open("/proc/self/maps")
                 if "librccl" in line and "librccl-net" not in line})
assert loaded, "torch did not load any librccl"
stray = [path for path in loaded if not path.startswith(rccl_prefix)]
assert not stray, f"torch loaded its bundled RCCL {stray}, which ignores the network plugin"
print("plugin loads:", plugin, "| RCCL in use:", ", ".join(loaded))
"""


def parts(target):
    if target.comm_library == "nccl":
        return [Part(block="nccl", stage="final",
                     test=(python_check("python", _NCCL_CHECK),),
                     help=("NCCL: the version bundled with the torch wheel.",))]
    if target.comm_library == "rccl" and target.plugin is not None:
        return _rccl_with_plugin(target, target.plugin)
    return []


def _rccl_with_plugin(target, source):
    work = "/tmp/aws-ofi-nccl-src"
    tarball = f"{work}/source.tar.gz"
    build = Part(
        block="rccl_ofi", stage="build",
        packages=("autoconf", "automake", "curl", "libfabric-dev", "libhwloc-dev", "libtool",
                  "make"),
        kept=Kept(name="aws-ofi-nccl", build=(
            cmd("mkdir", "-p", work),
            cmd("curl", "-fsSL", "--retry", "3", "-o", tarball, source.url),
            f"echo {cmd(source.sha256 + '  ' + tarball)} | sha256sum -c -",
            cmd("tar", "-xzf", tarball, "-C", work, "--strip-components=1"),
            cmd("cd", work),
            "./autogen.sh",
            cmd("./configure", f"--prefix={PLUGIN_PREFIX}", "--with-libfabric=/usr",
                "--with-rocm=/opt/rocm", "--with-hwloc=/usr", "--disable-tests"),
            'make -j"$(nproc)"',
            "make install",
            "cd /",
            cmd("rm", "-rf", work)),
            # the plugin's compile repeats for every torch or DeepSpeed change otherwise
            save=(f'cp -a {PLUGIN_PREFIX}/. "$kept/plugin"',),
            restore=(f'cp -a "$kept/plugin" {PLUGIN_PREFIX}',)))
    final = Part(
        block="rccl_ofi", stage="final",
        packages=("libfabric1", "libhwloc15"),
        copy_from_build=(PLUGIN_PREFIX,),
        # In the loader's cache, not on LD_LIBRARY_PATH: a site's SINGULARITYENV_LD_LIBRARY_PATH
        # (LUMI's bindings module, the wrapper's multi-node library path) replaces the image's
        # LD_LIBRARY_PATH whole, and would hide the plugin and ROCm.
        post=(f"printf '%s\\n' {PLUGIN_PREFIX}/lib /opt/rocm/lib > {LD_CONF}", "ldconfig"),
        env=(# torch wheels bundle their own RCCL, which does not use the plugin; preloading
             # the image's RCCL makes torch use it (lumi-ai-factory/laifs-container-recipes#18).
             ("LD_PRELOAD", ROCM_RCCL),),
        test=(python_check("python", _PLUGIN_CHECK, f"{PLUGIN_PREFIX}/lib/librccl-net.so", "/opt/rocm/"),),
        help=(f"RCCL from /opt/rocm with the {source.name} {source.version} network plugin "
              f"({PLUGIN_PREFIX}/lib/librccl-net.so).",))
    return [build, final]
