"""The image's own libfabric with the CXI (Slingshot) provider, and libcxi, that the RCCL
network plugin (the rccl_ofi block, next) is built against: the image needs nothing of the
host's Slingshot stack but its kernel driver.

Emits: "libfabric", build (a kept step: the four pinned sources fetched and compiled into
/opt/libfabric, then registered with the loader; its -dev packages for the os block) and final
(the run-time packages, /opt/libfabric copied from build, registered again). Nothing when the
plugin uses the distribution's libfabric.
Reads: target.comm.library (rccl), .plugin, .libfabric (cxi: the versions.yaml sources
cassini-headers, cxi-driver, libcxi and libfabric). No site fields, but a site whose
network.libfabric is `image` needs such a target (the recipe tree checks).

Example, recipes/targets/lumi-rocm.yaml, `comm: {library: rccl, plugin: aws-ofi-nccl,
libfabric: cxi}`, renders (containers/lumi-rocm.devel.def, shortened; its .base.def has the
last two lines):

    echo '--- devel: libfabric'
    kept=/mnt/kept/libfabric-cxi-...
    ...
        ./configure --prefix=/opt/libfabric --enable-only --enable-shm ... --enable-cxi=/opt/libfabric ...
    ...
    printf '%s\\n' /opt/libfabric/lib > /etc/ld.so.conf.d/hpcml-libfabric.conf
    ldconfig
"""

from ...recipes.target_model import Target
from ...values.shell import cmd, register_libraries
from .. import git_sources
from ..parts import Kept, Part

LIBFABRIC_PREFIX = "/opt/libfabric"
LIBFABRIC_LD_CONF = "/etc/ld.so.conf.d/hpcml-libfabric.conf"
# What libcxi (its configure's pkg-config checks and sensors.h) and libfabric's CXI provider
# (libcurl, json-c) build with, and the libraries they load at run time (Ubuntu 24.04 names)
CXI_BUILD_PACKAGES = (
    "libconfig-dev",
    "libcurl4-openssl-dev",
    "libfuse-dev",
    "libjson-c-dev",
    "libnl-3-dev",
    "libnuma-dev",
    "libsensors-dev",
    "libuv1-dev",
    "libyaml-dev",
)
CXI_RUN_PACKAGES = (
    "libconfig9",
    "libcurl4t64",
    "libfuse2t64",
    "libjson-c5",
    "libnl-3-200",
    "libnuma1",
    "libsensors5",
    "libuv1t64",
    "libyaml-0-2",
)


def parts(target: Target):
    # only beneath the RCCL network plugin, which links it (rccl_ofi, the next block)
    if target.comm.library != "rccl" or target.comm.plugin is None or not target.comm.libfabric:
        return []
    return _libfabric_cxi(target.comm.libfabric)


def lib_dir(target: Target) -> str:
    """The folder of the libfabric the network plugin loads: the image's own, or the distribution's."""
    return f"{LIBFABRIC_PREFIX}/lib" if target.comm.libfabric else target.multiarch_lib_dir


def _libfabric_cxi(stack):
    """libcxi and libfabric with the CXI provider built in, from the pinned sources, into
    LIBFABRIC_PREFIX: the image then needs nothing of the host's Slingshot stack but its
    kernel driver (LUMI's AI Factory images do the same)."""
    headers, driver, libcxi, libfabric = stack
    register = register_libraries(LIBFABRIC_LD_CONF, f"{LIBFABRIC_PREFIX}/lib")
    build = _build_lines(headers, driver, libcxi, libfabric)
    return [
        Part(
            block="libfabric",
            stage="build",
            packages=(
                *git_sources.PACKAGES,
                "autoconf",
                "automake",
                "libtool",
                "make",
                "pkg-config",
                *CXI_BUILD_PACKAGES,
            ),
            kept=Kept(
                name="libfabric-cxi",
                build=build,
                save=(f'cp -a {LIBFABRIC_PREFIX}/. "$kept/libfabric"',),
                restore=(f'cp -a "$kept/libfabric" {LIBFABRIC_PREFIX}',),
            ),
            # the plugin's link finds libcxi (libfabric's own need) through the loader's cache
            post=register,
            git_sources=git_sources.urls(*stack),
        ),
        Part(
            block="libfabric",
            stage="final",
            packages=CXI_RUN_PACKAGES,
            copy_from_build=(LIBFABRIC_PREFIX,),
            post=register,
        ),  # the plugin's help line names this stack too
    ]


def _build_lines(headers, driver, libcxi, libfabric) -> tuple:
    """The compile of libcxi and of libfabric with CXI built in, in a work folder removed after."""
    work = '"$work"'
    return (
        'work="$(mktemp -d /tmp/hpcml-cxi-XXXXXX)"',
        *git_sources.checkout(headers, f"{work}/cassini-headers"),
        *git_sources.checkout(driver, f"{work}/cxi-driver"),
        *git_sources.checkout(libcxi, f"{work}/libcxi"),
        *git_sources.checkout(libfabric, f"{work}/libfabric"),
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
        cmd(
            "./configure",
            f"--prefix={LIBFABRIC_PREFIX}",
            "--enable-only",
            "--enable-shm",
            "--enable-rxm",
            "--enable-rxd",
            "--enable-hook_hmem",
            "--enable-dmabuf_peer_mem",
            f"--enable-cxi={LIBFABRIC_PREFIX}",
            "--with-rocr=/opt/rocm",
            "--enable-rocr-dlopen",
        ),
        'make -j"$(nproc)"',
        "make install",
        "cd /",
        f"rm -rf {work}",
        # no libtool archives: linking the plugin through them would record this folder as
        # its rpath, and a site's host libfabric on LD_LIBRARY_PATH could not take its place
        f"rm -f {LIBFABRIC_PREFIX}/lib/*.la",
    )
