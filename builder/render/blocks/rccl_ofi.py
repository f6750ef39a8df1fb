"""RCCL with the aws-ofi-nccl network plugin, so that RCCL talks over Slingshot (libfabric)
instead of TCP sockets. The image's RCCL from /opt/rocm is preloaded: torch's ROCm wheels
bundle their own, which does not use the plugin.

Emits: "rccl_ofi", build (a kept step: the pinned plugin fetched and compiled into
/opt/aws-ofi-nccl against the libfabric block's libfabric or the distribution's) and final
(hwloc, the plugin copied from build, the loader's cache, LD_PRELOAD and NCCL_NET_PLUGIN in
%environment, the netcheck %tests, a %help line). Nothing without a plugin. `comm_stack()`:
the communication stack of any target (gloo and nccl too), for the runtime block's image.json.
Reads: target.comm.library (rccl), .plugin (a versions.yaml source: aws-ofi-nccl, or
aws-ofi-nccl-1.18 for the ROCm 6.4 stack), .libfabric (cxi, else the distribution's). No site
fields: the sites' network settings reach the image at run time, through the wrapper.

Example, recipes/targets/lumi-rocm.yaml (`comm` as in the libfabric block) renders
(containers/lumi-rocm.devel.def, shortened, then containers/lumi-rocm.base.def):

    echo '--- devel: rccl_ofi'
    ...
        ./configure --prefix=/opt/aws-ofi-nccl --with-libfabric=/opt/libfabric --with-rocm=/opt/rocm ...
    ...
    echo '--- base: rccl_ofi'
    printf '%s\\n' /opt/aws-ofi-nccl/lib /opt/rocm/lib > /etc/ld.so.conf.d/hpcml-rccl.conf
    ldconfig
"""

from hpcml_facts import CommStack

from ...recipes.target_model import Target
from ...values.shell import cmd, register_libraries
from .. import git_sources
from ..parts import Kept, Part
from . import libfabric

PLUGIN_PREFIX = "/opt/aws-ofi-nccl"
PLUGIN_FILE = f"{PLUGIN_PREFIX}/lib/librccl-net.so"
ROCM_PREFIX = "/opt/rocm/"
ROCM_RCCL = f"{ROCM_PREFIX}lib/librccl.so.1"
LD_CONF = "/etc/ld.so.conf.d/hpcml-rccl.conf"


def parts(target: Target):
    if target.comm.library == "rccl" and target.comm.plugin is not None:
        return _rccl_with_plugin(target, target.comm.plugin)
    return []


def comm_stack(target: Target) -> CommStack:
    """The communication stack as image.json records it (the runtime block writes it): the
    library, and where the smoke suite's preflight finds the plugin, the RCCL it must be used
    with and the libfabric it was built against."""
    plugin = target.comm.plugin.project if target.comm.plugin else None
    if target.comm.library != "rccl" or plugin is None:
        return CommStack(target.comm.library, plugin)
    return CommStack(
        target.comm.library,
        plugin,
        plugin_path=PLUGIN_FILE,
        rccl=ROCM_RCCL,
        libfabric_dir=libfabric.lib_dir(target),
        provider="cxi" if target.comm.libfabric else None,
    )


def _rccl_with_plugin(target: Target, plugin):
    build = _plugin_build(target, plugin)
    checks = _plugin_checks(target)
    final = Part(
        block="rccl_ofi",
        stage="final",
        packages=("libhwloc15", *(() if target.comm.libfabric else ("libfabric1",))),
        copy_from_build=(PLUGIN_PREFIX,),
        # In the loader's cache, not on LD_LIBRARY_PATH: a site's SINGULARITYENV_LD_LIBRARY_PATH
        # (LUMI's bindings module, the wrapper's multi-node library path) replaces the image's
        # LD_LIBRARY_PATH whole, and would hide the plugin and ROCm.
        post=register_libraries(LD_CONF, f"{PLUGIN_PREFIX}/lib", f"{ROCM_PREFIX}lib"),
        env=(  # torch wheels bundle their own RCCL, which does not use the plugin; preloading
            # the image's RCCL makes torch use it (lumi-ai-factory/laifs-container-recipes#18).
            ("LD_PRELOAD", ROCM_RCCL),
            # by path: which file name RCCL looks for by default changed between ROCm
            # releases (libnccl-net.so, librccl-net.so); HPE asks for the path on ROCm 7.2
            ("NCCL_NET_PLUGIN", PLUGIN_FILE),
        ),
        # each check in a process of its own: they read which libraries the loader mapped
        test=tuple(checks),
        help=(
            f"RCCL from {ROCM_PREFIX} with the {plugin.project} {plugin.version} network plugin "
            f"(NCCL_NET_PLUGIN={PLUGIN_FILE}), built against "
            + (
                f"the image's own libfabric {target.comm.libfabric[-1].version} with the CXI provider "
                f"and libcxi {target.comm.libfabric[-2].version} ({libfabric.LIBFABRIC_PREFIX}, "
                "fi_info in its bin/)."
                if target.comm.libfabric
                else "the distribution's libfabric (the CXI provider comes from the host)."
            ),
        ),
    )
    return [build, final]


def _plugin_build(target: Target, plugin) -> Part:
    """aws-ofi-nccl compiled from its pinned commit against the image's libfabric, kept between builds."""
    # the image's own libfabric (the libfabric block, just before), or the distribution's,
    # without CXI
    libfabric_dir = libfabric.LIBFABRIC_PREFIX if target.comm.libfabric else "/usr"
    # a folder of its own: %post may see the host's /tmp, shared with other builds
    work = '"$work"/aws-ofi-nccl'
    return Part(
        block="rccl_ofi",
        stage="build",
        packages=(
            *git_sources.PACKAGES,
            "autoconf",
            "automake",
            "libhwloc-dev",
            "libtool",
            "make",
            *(() if target.comm.libfabric else ("libfabric-dev",)),
        ),
        kept=Kept(
            name="aws-ofi-nccl",
            build=(
                'work="$(mktemp -d /tmp/hpcml-aws-ofi-nccl-XXXXXX)"',
                *git_sources.checkout(plugin, work),
                f"cd {work}",
                "./autogen.sh",
                cmd(
                    "./configure",
                    f"--prefix={PLUGIN_PREFIX}",
                    f"--with-libfabric={libfabric_dir}",
                    "--with-rocm=/opt/rocm",
                    "--with-hwloc=/usr",
                    "--disable-tests",
                ),
                'make -j"$(nproc)"',
                "make install",
                "cd /",
                'rm -rf "$work"',
            ),
            # the plugin's compile repeats for every torch or DeepSpeed change otherwise
            save=(f'cp -a {PLUGIN_PREFIX}/. "$kept/plugin"',),
            restore=(f'cp -a "$kept/plugin" {PLUGIN_PREFIX}',),
        ),
        git_sources=git_sources.urls(plugin),
    )


def _plugin_checks(target: Target) -> list:
    """%test: the plugin loads beside RCCL, torch takes the image's RCCL, and CXI is there."""
    libfabric_lib = libfabric.lib_dir(target)
    checks = [
        cmd("python", "-m", "smoke.netcheck", "plugin", "--rccl", ROCM_RCCL, "--libfabric-dir", libfabric_lib),
        cmd("python", "-m", "smoke.netcheck", "rccl", "--prefix", ROCM_PREFIX, "--import", "torch"),
    ]
    if target.comm.libfabric:
        checks.append(
            cmd(
                "python",
                "-m",
                "smoke.netcheck",
                "provider",
                "--libfabric",
                f"{libfabric_lib}/libfabric.so.1",
                "--provider",
                "cxi",
            )
        )
    return checks
