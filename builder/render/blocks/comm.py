"""The collective library: gloo (CPU), NCCL as torch ships it (CUDA), or RCCL with the
aws-ofi-nccl network plugin for Slingshot (ROCm)."""

from ...shell import cmd, python_check
from ..parts import Kept, Part
from . import sources

PLUGIN_PREFIX = "/opt/aws-ofi-nccl"
PLUGIN_FILE = f"{PLUGIN_PREFIX}/lib/librccl-net.so"
ROCM_PREFIX = "/opt/rocm/"
ROCM_RCCL = f"{ROCM_PREFIX}lib/librccl.so.1"
LD_CONF = "/etc/ld.so.conf.d/hpcml-rccl.conf"
LIBFABRIC_PREFIX = "/opt/libfabric"
LIBFABRIC_LD_CONF = "/etc/ld.so.conf.d/hpcml-libfabric.conf"
# What libcxi (its configure's pkg-config checks and sensors.h) and libfabric's CXI provider
# (libcurl, json-c) build with, and the libraries they load at run time (Ubuntu 24.04 names)
CXI_BUILD_PACKAGES = ("libconfig-dev", "libcurl4-openssl-dev", "libfuse-dev", "libjson-c-dev",
                      "libnl-3-dev", "libnuma-dev", "libsensors-dev", "libuv1-dev", "libyaml-dev")
CXI_RUN_PACKAGES = ("libconfig9", "libcurl4t64", "libfuse2t64", "libjson-c5", "libnl-3-200",
                    "libnuma1", "libsensors5", "libuv1t64", "libyaml-0-2")

_NCCL_CHECK = """
import torch
version = torch.cuda.nccl.version()
print("NCCL", ".".join(map(str, version)) if isinstance(version, tuple) else version)
"""

def parts(target):
    if target.comm_library == "nccl":
        return [Part(block="nccl", stage="final",
                     test=(python_check("python", _NCCL_CHECK),),
                     help=("NCCL: the version bundled with the torch wheel.",))]
    if target.comm_library == "rccl" and target.plugin is not None:
        return _rccl_with_plugin(target, target.plugin)
    return []


def image_facts(target) -> dict:
    """The communication stack as image.json records it: where the smoke suite's preflight
    finds the plugin, the RCCL it must be used with and the libfabric it was built against."""
    facts = {"library": target.comm_library, "plugin": target.plugin.name if target.plugin else None}
    if target.comm_library == "rccl" and target.plugin is not None:
        facts.update(plugin_path=PLUGIN_FILE, rccl=ROCM_RCCL, libfabric_dir=_libfabric_lib(target),
                     provider="cxi" if target.libfabric else None)
    return facts


def _libfabric_lib(target):
    return f"{LIBFABRIC_PREFIX}/lib" if target.libfabric else "/usr/lib/x86_64-linux-gnu"


def _rccl_with_plugin(target, plugin):
    parts = []
    libfabric_dir = "/usr"                  # the distribution's libfabric, without CXI
    if target.libfabric:
        parts += _libfabric_cxi(target.libfabric)
        libfabric_dir = LIBFABRIC_PREFIX
    # a folder of its own: %post may see the host's /tmp, shared with other builds
    work = '"$work"/aws-ofi-nccl'
    build = Part(
        block="rccl_ofi", stage="build",
        packages=(*sources.PACKAGES, "autoconf", "automake", "libhwloc-dev", "libtool", "make",
                  *(() if target.libfabric else ("libfabric-dev",))),
        kept=Kept(name="aws-ofi-nccl", build=(
            'work="$(mktemp -d /tmp/hpcml-aws-ofi-nccl-XXXXXX)"',
            *sources.checkout(plugin, work),
            f"cd {work}",
            "./autogen.sh",
            cmd("./configure", f"--prefix={PLUGIN_PREFIX}", f"--with-libfabric={libfabric_dir}",
                "--with-rocm=/opt/rocm", "--with-hwloc=/usr", "--disable-tests"),
            'make -j"$(nproc)"',
            "make install",
            "cd /",
            'rm -rf "$work"'),
            # the plugin's compile repeats for every torch or DeepSpeed change otherwise
            save=(f'cp -a {PLUGIN_PREFIX}/. "$kept/plugin"',),
            restore=(f'cp -a "$kept/plugin" {PLUGIN_PREFIX}',)))
    libfabric_lib = _libfabric_lib(target)
    checks = [cmd("python", "-m", "smoke.netcheck", "plugin", "--rccl", ROCM_RCCL,
                  "--libfabric-dir", libfabric_lib),
              cmd("python", "-m", "smoke.netcheck", "rccl", "--prefix", ROCM_PREFIX,
                  "--import", "torch")]
    if target.libfabric:
        checks.append(cmd("python", "-m", "smoke.netcheck", "provider", "--libfabric",
                          f"{libfabric_lib}/libfabric.so.1", "--provider", "cxi"))
    final = Part(
        block="rccl_ofi", stage="final",
        packages=("libhwloc15", *(() if target.libfabric else ("libfabric1",))),
        copy_from_build=(PLUGIN_PREFIX,),
        # In the loader's cache, not on LD_LIBRARY_PATH: a site's SINGULARITYENV_LD_LIBRARY_PATH
        # (LUMI's bindings module, the wrapper's multi-node library path) replaces the image's
        # LD_LIBRARY_PATH whole, and would hide the plugin and ROCm.
        post=(f"printf '%s\\n' {PLUGIN_PREFIX}/lib {ROCM_PREFIX}lib > {LD_CONF}", "ldconfig"),
        env=(# torch wheels bundle their own RCCL, which does not use the plugin; preloading
             # the image's RCCL makes torch use it (lumi-ai-factory/laifs-container-recipes#18).
             ("LD_PRELOAD", ROCM_RCCL),
             # by path: which file name RCCL looks for by default changed between ROCm
             # releases (libnccl-net.so, librccl-net.so); HPE asks for the path on ROCm 7.2
             ("NCCL_NET_PLUGIN", PLUGIN_FILE)),
        # each check in a process of its own: they read which libraries the loader mapped
        test=tuple(checks),
        help=(f"RCCL from {ROCM_PREFIX} with the {plugin.name} {plugin.version} network plugin "
              f"(NCCL_NET_PLUGIN={PLUGIN_FILE}), built against "
              + (f"the image's own libfabric {target.libfabric[-1].version} with the CXI provider "
                 f"and libcxi {target.libfabric[-2].version} ({LIBFABRIC_PREFIX}, fi_info in its bin/)."
                 if target.libfabric else
                 "the distribution's libfabric (the CXI provider comes from the host)."),))
    return parts + [build, final]


def _libfabric_cxi(stack):
    """libcxi and libfabric with the CXI provider built in, from the pinned sources, into
    LIBFABRIC_PREFIX: the image then needs nothing of the host's Slingshot stack but its
    kernel driver (LUMI's AI Factory images do the same)."""
    headers, driver, libcxi, libfabric = stack
    register = (f"printf '%s\\n' {LIBFABRIC_PREFIX}/lib > {LIBFABRIC_LD_CONF}", "ldconfig")
    work = '"$work"'
    build = (
        'work="$(mktemp -d /tmp/hpcml-cxi-XXXXXX)"',
        *sources.checkout(headers, f"{work}/cassini-headers"),
        *sources.checkout(driver, f"{work}/cxi-driver"),
        *sources.checkout(libcxi, f"{work}/libcxi"),
        *sources.checkout(libfabric, f"{work}/libfabric"),
        # the hardware and kernel interface headers, for the two compiles below only
        f"cp -a {work}/cassini-headers/include/. /usr/include/",
        f"cp -a {work}/cxi-driver/include/. /usr/include/",
        f"cd {work}/libcxi",
        "./autogen.sh",
        cmd("./configure", f"--prefix={LIBFABRIC_PREFIX}", "--with-rocm=/opt/rocm"),
        'make -j"$(nproc)"',
        "make install",
        f"cd {work}/libfabric",
        "./autogen.sh",
        cmd("./configure", f"--prefix={LIBFABRIC_PREFIX}", "--enable-only", "--enable-shm",
            "--enable-rxm", "--enable-rxd", "--enable-hook_hmem", "--enable-dmabuf_peer_mem",
            f"--enable-cxi={LIBFABRIC_PREFIX}", "--with-rocr=/opt/rocm", "--enable-rocr-dlopen"),
        'make -j"$(nproc)"',
        "make install",
        "cd /",
        f"rm -rf {work}",
        # no libtool archives: linking the plugin through them would record this folder as
        # its rpath, and a site's host libfabric on LD_LIBRARY_PATH could not take its place
        f"rm -f {LIBFABRIC_PREFIX}/lib/*.la")
    return [
        Part(block="libfabric", stage="build",
             packages=(*sources.PACKAGES, "autoconf", "automake", "libtool", "make", "pkg-config",
                       *CXI_BUILD_PACKAGES),
             kept=Kept(name="libfabric-cxi", build=build,
                       save=(f'cp -a {LIBFABRIC_PREFIX}/. "$kept/libfabric"',),
                       restore=(f'cp -a "$kept/libfabric" {LIBFABRIC_PREFIX}',)),
             # the plugin's link finds libcxi (libfabric's own need) through the loader's cache
             post=register),
        Part(block="libfabric", stage="final", packages=CXI_RUN_PACKAGES,
             copy_from_build=(LIBFABRIC_PREFIX,),
             post=register),     # the plugin's help line names this stack too
    ]
