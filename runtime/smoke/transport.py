"""What NCCL/RCCL used to reach other nodes, read from its NCCL_DEBUG=INFO lines.

The lines come from the libraries and the plugin (aws-ofi-nccl prints "NET/OFI Selected
Provider is cxi"; NCCL prints "Using network IB" or "NET/Socket : Using ..."; a missing plugin
"No plugin found (librccl-net.so)"). Sites check the same lines by hand or in ReFrame.
"""

import re

_VERSION = re.compile(r"\b(NCCL|RCCL) version ([0-9][\w.+-]*)")
_PLUGIN = re.compile(r"(?:Loaded net plugin|NET/Plugin: Loaded(?: net)? plugin|NET/OFI Using) ([^(\n]+?)\s*(?:\(|$)")
_PROVIDER = re.compile(r"NET/OFI Selected [pP]rovider is (\w+)")
_NETWORK = re.compile(r"Using network ([\w ]+?)\s*$")
_IB = re.compile(r"NET/IB\s*: Using \[\d+\]")
_SOCKET = re.compile(r"NET/Socket\s*: Using")
_MISSING = re.compile(r"(No plugin found \([^)]*\)|Could not find[^,\n]*plugin[^,\n]*|Failed to open lib[nr]ccl-net[^,\n]*)")

NETWORK_NAMES = {"ib": "ib", "socket": "socket", "aws libfabric": "ofi", "libfabric": "ofi", "ofi": "ofi"}


def parse(lines):
    """A summary of one rank's log: library version, plugin, provider and network used."""
    info = {"library": None, "plugin": None, "provider": None, "net": None, "missing_plugin": None}
    for line in lines:
        if (match := _VERSION.search(line)) and not info["library"]:
            info["library"] = f"{match.group(1)} {match.group(2)}"
        if (match := _PLUGIN.search(line)) and not info["plugin"]:
            info["plugin"] = match.group(1).strip()
        if match := _PROVIDER.search(line):
            info["provider"] = match.group(1)
            info["net"] = "ofi"
        if match := _NETWORK.search(line):
            info["net"] = NETWORK_NAMES.get(match.group(1).lower(), match.group(1).lower())
        elif _IB.search(line) and info["net"] is None:
            info["net"] = "ib"
        elif _SOCKET.search(line) and info["net"] is None:
            info["net"] = "socket"
        if match := _MISSING.search(line):
            info["missing_plugin"] = match.group(1).strip()
    return info


def judge(summaries, expected, nodes, backend):
    """Verdict for the ranks' summaries against the site's network (dict or None)."""
    nets = sorted({s["net"] or "unknown" for s in summaries})
    if backend == "gloo":
        return {"verdict": "none", "nets": ["socket"],
                "why": "gloo (CPU) always talks TCP; the network check is for NCCL/RCCL"}
    if nodes <= 1:
        return {"verdict": "pass", "nets": nets,
                "why": "one node: ranks talk over shared memory/NVLink/xGMI, the network is unused"}
    if not expected:
        return {"verdict": "none", "nets": nets, "why": "the site file names no network"}
    want = expected["transport"]
    missing = sorted({s["missing_plugin"] for s in summaries if s["missing_plugin"]})
    if nets != [want]:
        why = f"the site expects {want} between nodes but ranks used {', '.join(nets)}"
        if missing:
            why += f" ({missing[0]}: the net plugin is not on LD_LIBRARY_PATH)"
        return {"verdict": "fail", "nets": nets, "why": why}
    providers = sorted({s["provider"] or "unknown" for s in summaries})
    if expected.get("provider") and providers != [expected["provider"]]:
        return {"verdict": "fail", "nets": nets,
                "why": f"OFI provider {', '.join(providers)}, the site expects {expected['provider']}"}
    return {"verdict": "pass", "nets": nets, "why": f"every rank used {want}"
            + (f" ({expected['provider']})" if expected.get("provider") else "")}
