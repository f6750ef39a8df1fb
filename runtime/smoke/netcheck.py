"""The ROCm image's network and build checks (its %test): each loads the image's real libraries
the way RCCL, torch and libfabric do, and fails loudly on the traps that otherwise pass
unnoticed until a multi-node job crawls:

- plugin:    NCCL_NET_PLUGIN names a file that is not there, or that does not load; RCCL then
             says nothing and falls back to TCP sockets. A plugin built against another RCCL or
             libfabric has unresolved symbols ("undefined symbol: fi_...") that only RTLD_NOW
             shows at load time; a file that exports no ncclNet_v<N> is no net plugin; and a
             plugin that maps a libfabric other than the image's gets no CXI provider.
- rccl:      torch's wheel bundles its own librccl, which never loads the image's network
             plugin; the image's RCCL must win (LD_PRELOAD of it: the loader then reuses it by
             soname instead of torch's copy).
- provider:  a libfabric built without the CXI provider (neither built in, which maps libcxi,
             nor as a DSO in <libdir>/libfabric/libcxi-fi.so) leaves aws-ofi-nccl no Slingshot
             provider; on a node with a CXI device, `fi_info -p cxi` must also find it.
- wavefront: DeepSpeed's ROCm ops take the wavefront size from rocminfo at build time; on a
             build host without a GPU they were compiled for 32-wide wavefronts while gfx90a
             runs 64, and then compute wrong results. The build records what it used as JSON
             ({"arch": "gfx90a", "wavefront_size": 64, "detected_by": "..."}) and this
             compares it with the image's arch and, where a GPU is at hand, with rocminfo.

Each check runs in a fresh process (it reads /proc/self/maps after loading libraries):

    python -m smoke.netcheck plugin --rccl /opt/rocm/lib/librccl.so.1 --libfabric-dir /opt/libfabric/lib
    python -m smoke.netcheck rccl --prefix /opt/rocm/lib
    python -m smoke.netcheck provider --libfabric /opt/libfabric/lib/libfabric.so.1
    python -m smoke.netcheck wavefront --record FILE --arch gfx90a --expected 64

smoke/loading.py loads the libraries and reads the mappings; smoke/wavefront.py holds the
wavefront check. Success prints one line `netcheck <check>: ok: ...` on stdout; failure one line
`netcheck <check>: FAIL: ...` on stderr and exit status 1; bad usage exits 2.
"""

import argparse
import ctypes
import importlib
import os
import shutil
import sys

import hpcml_contract as contract

from . import commands
from .loading import LOAD_MODE, Fail, inside, last_line, load, mapped_named
from .wavefront import ROCMINFO, check_wavefront

# RCCL looks up the newest interface it knows first; plugins export one or several versions
NET_VERSIONS = range(11, 1, -1)
# provider -> (basename prefix of the library a built-in provider maps, sysfs class of its devices)
PROVIDERS = {"cxi": ("libcxi.so", "class/cxi")}
FI_INFO_TIMEOUT = 30


# --- plugin -----------------------------------------------------------------------------------


def check_plugin(args):
    plugin = args.plugin or os.environ.get("NCCL_NET_PLUGIN")
    if not plugin:
        raise Fail("NCCL_NET_PLUGIN is not set; expected the path of the image's net plugin")
    if not os.path.isfile(plugin):
        raise Fail(
            f"net plugin {plugin} does not exist: RCCL would silently fall back to TCP "
            "sockets; expected the image's aws-ofi-nccl plugin there"
        )
    load(args.rccl, "RCCL")  # first, as RCCL itself is there before its plugin
    try:
        library = ctypes.CDLL(plugin, mode=LOAD_MODE)
    except OSError as error:
        raise Fail(
            f"net plugin {plugin} does not load: {error}; its symbols must resolve against "
            f"the image's RCCL ({args.rccl}) and libfabric, else RCCL falls back to sockets"
        ) from None
    version = next((f"ncclNet_v{n}" for n in NET_VERSIONS if hasattr(library, f"ncclNet_v{n}")), None)
    if version is None:
        raise Fail(
            f"{plugin} exports no ncclNet_v* symbol (looked for v{NET_VERSIONS[0]} down "
            f"to v{NET_VERSIONS[-1]}): not an NCCL/RCCL net plugin"
        )
    fabrics = mapped_named("libfabric.so")
    if args.libfabric_dir:
        if not fabrics:
            raise Fail(
                f"net plugin {plugin} loaded no libfabric; expected the image's libfabric from {args.libfabric_dir}"
            )
        outside = [path for path in fabrics if not inside(path, args.libfabric_dir)]
        if outside:
            raise Fail(
                f"net plugin {plugin} loaded libfabric {', '.join(outside)}; expected the "
                f"image's libfabric from {args.libfabric_dir} (its CXI provider)"
            )
    fabric = ", ".join(fabrics) if fabrics else "none loaded"
    return f"{plugin} exports {version}; libfabric: {fabric}"


# --- rccl -------------------------------------------------------------------------------------


def check_rccl(args):
    try:
        importlib.import_module(args.module)
    except Exception as error:  # torch fails with OSError too when a library is missing
        raise Fail(f"cannot import {args.module}: {type(error).__name__}: {error}") from None
    rccls = mapped_named("librccl", exclude="librccl-net")
    if not rccls:
        raise Fail(f"{args.module} loaded no librccl; expected RCCL from {args.prefix}")
    bundled = [path for path in rccls if not inside(path, args.prefix)]
    if bundled:
        raise Fail(
            f"{args.module} loaded its bundled RCCL {', '.join(bundled)}, which ignores the "
            f"network plugin; expected RCCL from {args.prefix} "
            f"(LD_PRELOAD={os.path.join(args.prefix, 'librccl.so.1')})"
        )
    return f"{args.module} uses RCCL {', '.join(rccls)}"


# --- provider ---------------------------------------------------------------------------------


def check_provider(args):
    provider = args.provider
    library_prefix, device_class = PROVIDERS[provider]
    load(args.libfabric, "libfabric")
    how = provider_library(args.libfabric, provider, library_prefix)
    sysfs = os.environ.get(contract.NETCHECK_SYSFS, "/sys")  # tests fake a CXI device
    devices = os.path.join(sysfs, device_class)
    if not (os.path.isdir(devices) and os.listdir(devices)):
        return (
            f"libfabric {args.libfabric} has {provider} ({how}); provider library present; no "
            f"{provider.upper()} device here, fi_info -p {provider} runs on a GPU node"
        )
    result = run_fi_info(args, provider)
    return f"libfabric {args.libfabric} has {provider} ({how}); fi_info -p {provider}: {result}"


def provider_library(libfabric, provider, library_prefix):
    """How libfabric carries ``provider``: built in (its load mapped the provider's library) or
    as a DSO beside it that loads; Fail when neither."""
    builtin = mapped_named(library_prefix)
    if builtin:
        return f"built in: loads {builtin[0]}"
    dso = os.path.join(os.path.dirname(libfabric), "libfabric", f"lib{provider}-fi.so")
    if os.path.isfile(dso):
        load(dso, f"libfabric's {provider} provider DSO", mode=os.RTLD_NOW)  # after libfabric
        return f"DSO {dso}"
    raise Fail(
        f"libfabric {libfabric} has no {provider} provider (not built in: it does not load "
        f"{library_prefix}; no DSO {dso}); expected libfabric built with --enable-{provider}"
    )


def find_fi_info(args):
    if args.fi_info:
        return args.fi_info
    beside = os.path.join(os.path.dirname(os.path.abspath(args.libfabric)), "..", "bin", "fi_info")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return os.path.normpath(beside)
    return shutil.which("fi_info")


def run_fi_info(args, provider):
    """`fi_info -p PROVIDER` against this libfabric (its directory first on LD_LIBRARY_PATH);
    its last line on success, Fail otherwise."""
    fi_info = find_fi_info(args)
    if not fi_info:
        raise Fail(
            f"this node has a {provider.upper()} device but no fi_info to ask (none beside "
            f"{args.libfabric} in ../bin, none on PATH); pass --fi-info"
        )
    libdir = os.path.dirname(os.path.abspath(args.libfabric))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [libdir, env.get("LD_LIBRARY_PATH")]))
    command = [fi_info, "-p", provider]
    try:
        done = commands.run(command, args.timeout, env=env)
    except OSError as error:
        raise Fail(f"cannot run {fi_info}: {error}") from None
    if done.timed_out:
        raise Fail(f"{' '.join(command)} {done.late} (libfabric {args.libfabric})")
    if done.returncode != 0:
        raise Fail(
            f"{' '.join(command)} exited {done.returncode} on a node with a "
            f"{provider.upper()} device: {last_line(done.stderr, done.stdout)}; expected the "
            f"{provider} provider of libfabric {args.libfabric} to find it"
        )
    return last_line(done.stdout)


# --- command line -----------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # one line, no usage block: it lands in a build log next to other checks
        self.exit(2, f"netcheck: error: {message} (see python -m smoke.netcheck --help)\n")


def parser():
    top = _Parser(prog="netcheck", description="The ROCm image's network and build checks.")
    checks = top.add_subparsers(dest="check", required=True, metavar="CHECK")
    plugin = checks.add_parser("plugin", help="the net plugin loads against RCCL and libfabric")
    plugin.add_argument("--plugin", help="the plugin file (default: $NCCL_NET_PLUGIN)")
    plugin.add_argument("--rccl", required=True, help="the image's librccl, loaded first")
    plugin.add_argument("--libfabric-dir", help="the plugin must map libfabric from here")
    rccl = checks.add_parser("rccl", help="a module (torch) uses the image's RCCL, not its own")
    rccl.add_argument("--prefix", required=True, help="directory of the image's librccl")
    rccl.add_argument("--import", dest="module", default="torch", help="module to import (torch)")
    provider = checks.add_parser("provider", help="libfabric carries the provider (cxi)")
    provider.add_argument("--libfabric", required=True, help="the image's libfabric.so.1")
    provider.add_argument("--provider", default="cxi", choices=sorted(PROVIDERS))
    provider.add_argument(
        "--fi-info", help="fi_info to run where a device is present (default: <libdir>/../bin/fi_info, else PATH)"
    )
    provider.add_argument(
        "--timeout", type=float, default=FI_INFO_TIMEOUT, help=f"seconds fi_info may take ({FI_INFO_TIMEOUT})"
    )
    wavefront = checks.add_parser("wavefront", help="DeepSpeed's ops match the arch's wavefront")
    wavefront.add_argument("--record", required=True, help="the build's wavefront JSON")
    wavefront.add_argument("--arch", required=True, help="the image's GPU arch (gfx90a)")
    wavefront.add_argument("--expected", required=True, type=int, help="its wavefront size (64)")
    wavefront.add_argument("--rocminfo", help=f"rocminfo to compare with (default: {ROCMINFO}, else PATH)")
    return top


# the registry: each check by name, in --help order (its options are in parser())
CHECKS = {"plugin": check_plugin, "rccl": check_rccl, "provider": check_provider, "wavefront": check_wavefront}


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        details = CHECKS[args.check](args)
    except Fail as failure:
        print(f"netcheck {args.check}: FAIL: {failure}", file=sys.stderr, flush=True)
        return 1
    print(f"netcheck {args.check}: ok: {details}", flush=True)
    return 0


def run(check, argv, timeout=120, env=None):
    """Run one check in a fresh interpreter (each inspects its own process's mappings), for
    `smoke preflight`: (passed, its one line)."""
    if check not in CHECKS:
        raise ValueError(f"unknown netcheck {check!r}; one of {', '.join(CHECKS)}")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # smoke's parent
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, full_env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "smoke.netcheck", check, *map(str, argv)]
    done = commands.run(command, timeout, env=full_env)
    if done.timed_out:
        return False, f"netcheck {check}: FAIL: {done.late}"
    if done.returncode == 0:
        return True, last_line(done.stdout)
    return False, last_line(done.stderr, done.stdout)


if __name__ == "__main__":
    sys.exit(main())
