"""What NCCL/RCCL used to reach other nodes, read from its NCCL_DEBUG=INFO lines.

The lines come from the library and from the net plugin, and each has changed over the years
(the sample logs in tests/data/nccl name the upstream files and tags):

- the network: NCCL's "Using network IB|Socket|<plugin name>" (init.cc), else the channels'
  "via NET/<name>/0", else the plugin's provider line, else "NET/IB : Using [0]..." or
  "NET/Socket : Using [0]...".
- aws-ofi-nccl, which is also RCCL's plugin since 1.18 (librccl-net.so): its own lines start
  "NET/OFI " ("Initializing aws-ofi-nccl 1.21.1", "Selected provider is cxi, fabric is cxi
  (found 4 nics)"; "Using aws-ofi-nccl 1.6.0" before 1.7.3 and "Selected Provider is cxi"
  before 1.14, as the old aws-ofi-rccl fork still prints). NCCL knows it as "Libfabric", or as
  "AWS Libfabric" or "OFI" when NCCL_NET asks for that name ("Loaded net plugin Libfabric
  (v10)", "Using network AWS Libfabric"); RCCL 2.22 loads it through ncclNetPlugin_v8, which
  prints no "Loaded" line.
- a missing plugin: "No plugin found (librccl-net.so)" (NCCL <= 2.21), "Could not find:
  librccl-net.so. Using internal ..." (2.22+), "Plugin load (librccl-net.so) returned 2 : ..."
  (2.18); a plugin that is there but does not work: a dlopen error naming another library, or
  the plugin's own "NCCL WARN NET/OFI ..." when it finds no provider.
- NCCL_NET naming a network nobody provides stops NCCL: "Error: network AWS Libfabric not
  found." (<= 2.26), "Failed to initialize any NET plugin" (2.27+).
"""

import re
from pathlib import PurePosixPath

from .verdict import Verdict

# "host:pid:tid [dev] NCCL ...", after "[2025-11-12 11:11:57] " on WARN lines since NCCL 2.23 or a
# launcher's own prefix ("(RayWorkerWrapper pid=927) ")
_PREFIX = re.compile(r"(?:^|\s)(?P<host>[^\s:\[\]]+):(?P<pid>\d+):\d+ \[\d+\] ")
_VERSION = re.compile(r"\b(NCCL|RCCL) version\s*:?\s*([0-9][\w.+]*)")
_LOADED = re.compile(r"NET/Plugin\s*: Loaded (?:net )?plugin (.+?)\s*(?:\(v\d+\)\s*)?$")
_ASSIGNED = re.compile(r"Assigned NET plugin (.+?) to comm")
_PACKAGE = re.compile(r"NET/OFI (?:Initializing|Using) (aws-ofi-[nr]ccl\S*(?: \S+)?)\s*$")
_PROVIDER = re.compile(r"NET/OFI Selected [pP]rovider is (\w+)")
_NETWORK = re.compile(r"\bUsing network (.+?)\s*$")
_CHANNEL = re.compile(r"\bvia NET/([^/]+)/\d")
_IB = re.compile(r"NET/IB\s*: Using \[\d+\]")
_SOCKET = re.compile(r"NET/Socket\s*: Using \[\d+\]")
_NET_ERROR = re.compile(r"NCCL WARN (Error: network (.*?) not found\.?|Failed to initialize any NET plugin)")
_MISSING = [
    re.compile(r"NET/Plugin\s*:.*No plugin found \(([^)]+)\)"),  # NCCL 2.11-2.21
    re.compile(r"NET/Plugin\s*: Could not find:\s*(.+?)\.(?:\s+Using [^.]*\.)?\s*$"),  # 2.22+
    re.compile(r"NET/Plugin\s*: Plugin load \(([^)]+)\) returned 2\b"),  # 2.18, ENOENT
    re.compile(r"Failed to open (lib[nr]ccl-net[^\s,]*)"),
]
_NO_PLUGIN = re.compile(r"NET/Plugin\s*: No plugin found, using internal")  # 2.17-2.18, no name
_DLERROR = re.compile(
    r"NET/Plugin\s*: (?:Plugin load (?:\([^)]*\) )?returned \d+ : "
    r"(?:dlerror=)?)?((\S+?): (?:cannot open shared object file|undefined symbol|version `)"
    r"(?:(?! when loading)[^.])*)"
)
_PLUGIN_WARN = re.compile(r"NCCL WARN (NET/OFI .+?)\s*$")
_NO_SYMBOL = re.compile(r"NET/Plugin\s*: (Failed to find ncclNetPlugin symbol \(.*)$")

NETWORK_NAMES = {"ib": "ib", "socket": "socket", "aws libfabric": "ofi", "libfabric": "ofi", "ofi": "ofi"}
INTERNAL = {"ib", "socket"}
# what parse() tells of a rank, in this order
SUMMARY = ("library", "plugin", "plugin_version", "provider", "net", "missing_plugin", "plugin_error", "net_error")


def _net(name):
    return NETWORK_NAMES.get(name.strip().lower(), name.strip().lower())


def processes(lines):
    """A log with several processes' lines interleaved (srun's stdout), split by host:pid in
    the order they first speak. Lines without a prefix (RCCL's "HIP version  : ..." after its
    version line) belong to the process before them; '#' comment lines are skipped."""
    split, current = {}, None
    for line in lines:
        if line.lstrip().startswith("#"):
            continue
        if match := _PREFIX.search(line):
            current = f"{match['host']}:{match['pid']}"
        if current is not None:
            split.setdefault(current, []).append(line)
    return split


def parse(lines):
    """A summary of one rank's log: library version, plugin, provider and network used.

    net: "ofi", "ib", "socket" (or the plugin's own name, lowercased), None where NCCL chose
    none; plugin: the net plugin as NCCL named it ("Libfabric", "AWS Libfabric", "OFI"), else
    its package; plugin_version: "aws-ofi-nccl 1.21.1"; missing_plugin: the plugin file(s)
    NCCL looked for and did not load; plugin_error: why a plugin that is there did not work;
    net_error: NCCL's own error when NCCL_NET names a network that is not there.
    """
    info = dict.fromkeys(SUMMARY)
    # what the lines hint at, weighed once all are read: "Using network", "via NET/", the
    # IB and socket probes, and a missing plugin that no line names
    clues = {"used": None, "channel": None, "ib": None, "socket": None, "anonymous_missing": False}
    for line in lines:
        if not line.lstrip().startswith("#"):
            _read_what_was_used(line, info, clues)
            _read_what_went_wrong(line, info, clues)
    _decide(info, clues)
    return info


def _read_what_was_used(line, info, clues):
    """The library, the plugin and its provider, and the network named on ``line``."""
    if (match := _VERSION.search(line)) and not info["library"]:
        info["library"] = f"{match.group(1)} {match.group(2)}"
    if (match := _LOADED.search(line)) and not info["plugin"]:
        info["plugin"] = match.group(1)
    if (match := _ASSIGNED.search(line)) and not info["plugin"] and _net(match.group(1)) not in INTERNAL:
        info["plugin"] = match.group(1)
    if (match := _PACKAGE.search(line)) and not info["plugin_version"]:
        info["plugin_version"] = match.group(1)
    if match := _PROVIDER.search(line):
        info["provider"] = match.group(1)
    if match := _NETWORK.search(line):
        clues["used"] = match.group(1)
    if match := _CHANNEL.search(line):
        clues["channel"] = clues["channel"] or match.group(1)
    if _IB.search(line):
        clues["ib"] = "ib"
    if _SOCKET.search(line):
        clues["socket"] = "socket"


def _read_what_went_wrong(line, info, clues):
    """NCCL's network error, a plugin file not found, and why a plugin that is there failed."""
    if (match := _NET_ERROR.search(line)) and not info["net_error"]:
        info["net_error"] = match.group(1)
    for pattern in _MISSING:
        if match := pattern.search(line):
            names = match.group(1).split()  # "ofi librccl-net-ofi.so": the .so NCCL tried
            info["missing_plugin"] = next((n for n in names if n.endswith(".so")), names[0])
            break
    else:
        clues["anonymous_missing"] = clues["anonymous_missing"] or bool(_NO_PLUGIN.search(line))
    if (match := _DLERROR.search(line)) and not info["plugin_error"]:
        failed = PurePosixPath(match.group(2)).name
        if not ("ccl-net" in failed and "No such file" in line):  # the plugin itself: missing
            info["plugin_error"] = match.group(1).strip()
    for pattern in (_PLUGIN_WARN, _NO_SYMBOL):
        if (match := pattern.search(line)) and not info["plugin_error"]:
            info["plugin_error"] = match.group(1)


def _decide(info, clues):
    """The network used, from the strongest clue; the plugin's name where no line gave it; a
    missing plugin forgotten once a later name loaded."""
    used = clues["used"]
    if used:
        info["net"] = _net(used)
    elif info["net_error"]:
        info["net"] = None  # NCCL stopped: the IB/Socket probes were not used
    elif clues["channel"]:
        info["net"] = _net(clues["channel"])
    elif info["provider"]:
        info["net"] = "ofi"
    else:
        info["net"] = clues["ib"] or clues["socket"]
    loaded = info["plugin"] or info["plugin_version"] or info["provider"]
    if not info["plugin"]:
        if info["net"] and info["net"] not in INTERNAL and used:
            info["plugin"] = used  # RCCL 2.22's v8 path prints no "Loaded" line
        elif info["plugin_version"]:
            info["plugin"] = info["plugin_version"].split()[0]
    if loaded:
        info["missing_plugin"] = None  # a first name was not found, a later one loaded
    elif clues["anonymous_missing"] and not info["missing_plugin"]:
        library = (info["library"] or "?").split()[0]
        info["missing_plugin"] = {"RCCL": "librccl-net.so", "NCCL": "libnccl-net.so"}.get(library, "lib[nr]ccl-net.so")


def _ranks(indexes, most=8):
    shown = ", ".join(str(i) for i in indexes[:most])
    more = f" and {len(indexes) - most} more" if len(indexes) > most else ""
    return f"rank{'s' if len(indexes) > 1 else ''} {shown}{more}"


def _hints(summaries):
    """Why a plugin was not used, from the ranks that did not use it."""
    hints = []
    missing = sorted({s.get("missing_plugin") for s in summaries if s.get("missing_plugin")})
    if missing:
        hints.append(
            f"{missing[0]} was not found: the net plugin is not on LD_LIBRARY_PATH "
            "or NCCL_NET_PLUGIN names a file that is not there"
        )
    errors = sorted({s.get("plugin_error") for s in summaries if s.get("plugin_error")})
    if errors:
        hints.append(f"the net plugin is there but failed: {errors[0]}")
    return hints


def judge(summaries, expected, nodes, backend):
    """Verdict for the ranks' summaries (in rank order) against the site's network
    (hpcml_facts.Network)."""
    nets = sorted({s.get("net") or "unknown" for s in summaries})
    if backend == "gloo":
        return Verdict.none("gloo (CPU) always talks TCP; the network check is for NCCL/RCCL", nets=["socket"])
    if nodes <= 1:
        return Verdict.passed("one node: ranks talk over shared memory/NVLink/xGMI, the network is unused", nets=nets)
    if not expected.transport:
        return Verdict.none("the site file names no network", nets=nets)
    want = expected.transport
    stopped = [i for i, s in enumerate(summaries) if s.get("net_error")]
    if stopped:
        error = summaries[stopped[0]]["net_error"]
        named = re.search(r"network (.*?) not found", error)
        where = "" if len(stopped) == len(summaries) else f" on {_ranks(stopped)}"
        why = (
            f"NCCL_NET{'=' + repr(named.group(1)) if named else ''} names a network that no loaded "
            f'plugin provides: NCCL stopped{where} with "{error}"'
        )
        hints = _hints([summaries[i] for i in stopped])
        why += f" ({'; '.join(hints)})" if hints else " (unset NCCL_NET or make its plugin loadable)"
        return Verdict.failed(why, nets=nets)
    if nets != [want]:
        why = f"the site expects {want} between nodes but ranks used {', '.join(nets)}"
        wrong = [i for i, s in enumerate(summaries) if (s.get("net") or "unknown") != want]
        if len(nets) > 1 and len(wrong) < len(summaries):
            why += f" ({_ranks(wrong)} did not use {want})"
        hints = _hints([summaries[i] for i in wrong])
        if hints:
            why += f" ({'; '.join(hints)})"
        return Verdict.failed(why, nets=nets)
    providers = sorted({s.get("provider") or "unknown" for s in summaries})
    if expected.provider and providers != [expected.provider]:
        return Verdict.failed(f"OFI provider {', '.join(providers)}, the site expects {expected.provider}", nets=nets)
    provider = f" ({expected.provider})" if expected.provider else ""
    return Verdict.passed(f"every rank used {want}{provider}", nets=nets)
