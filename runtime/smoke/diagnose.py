"""Turn an error (or a timeout) into one likely cause a person can act on."""

import re
import socket

from . import transport

UNKNOWN = "unknown; the error above and the other ranks' messages say more"
DIED = "another rank died or exited early (look at the other ranks' messages above)"
CAUSES = (
    (
        r"Name or service not known|gai error|Temporary failure in name resolution|nodename nor servname|"
        r"does not resolve",
        "the master address does not resolve on this node (not in DNS or /etc/hosts; set MASTER_ADDR "
        "to a name or address every node can resolve)",
    ),
    (
        r"Address already in use|EADDRINUSE|errno: 98|is in use",
        "MASTER_PORT is already in use on the master node (another job or process holds it; "
        "choose another MASTER_PORT)",
    ),
    # NCCL's own words for a missing plugin (not the tuner's "Could not find: librccl-tuner.so",
    # not "Plugin name set by env to .../librccl-net.so", which a working plugin prints)
    (
        r"No plugin found|Could not find:\s*lib[nr]ccl-net|Error: network .* not found|"
        r"Failed to initialize any NET plugin",
        "the NCCL/RCCL network plugin is missing (NCCL_NET_PLUGIN names no file, or its directory "
        "is not on LD_LIBRARY_PATH)",
    ),
    (
        r"Connection closed by peer|Connection reset|Broken pipe|remote process exited|peer.*(closed|died)|"
        r"EOF|ProcessGroupNCCL.*(abort|Abort)",
        DIED,
    ),
    (
        r"Connection refused",
        "nothing listens at MASTER_ADDR:MASTER_PORT: rank 0 failed before it opened its store, or "
        "the ranks disagree on the address or port",
    ),
    (
        r"[Tt]imed? ?out|[Tt]imeout|deadline",
        "a rank is stuck, slow or never started (check that every rank was launched and that all "
        "agree on MASTER_ADDR and MASTER_PORT)",
    ),
)


# NCCL's WARN lines that name a cause its error text leaves out ("invalid usage"); read from
# the whole transport log, since the lines that end it only unwind the call stack
WARNINGS = (
    (
        r"Duplicate GPU detected : rank (\d+) and rank (\d+)",
        "ranks {0} and {1} share one GPU: this node starts more ranks than it has GPUs for them "
        "(match --ntasks-per-node or --nproc_per_node to the GPUs, and check CUDA_VISIBLE_DEVICES "
        "and --gpus-per-task)",
    ),
)


# gloo and NCCL name the peer whose connection broke: "[198.18.0.12]:43215", "to 10.1.2.3<5678>"
_PEER = re.compile(r"\[?((?:\d{1,3}\.){3}\d{1,3})\]?(?::\d+|<\d+>)")


def lost_peers(text):
    """'198.18.0.12 (n2)' for each peer address in an error, named as this node resolves it."""
    named = []
    for address in dict.fromkeys(_PEER.findall(text)):
        try:
            name = socket.gethostbyaddr(address)[0].split(".")[0]
        except (OSError, UnicodeError):
            name = "no name"
        named.append(f"{address} ({name})")
    return named


def likely_cause(text, transport_lines=()):
    """The cause from the error's text, else from this rank's NCCL log: its WARN lines (all of
    them), then what it says about the net plugin."""
    for pattern, cause in CAUSES:
        if re.search(pattern, text):
            peers = lost_peers(text) if cause is DIED else []
            return cause.replace("another rank", "the rank(s) at " + ", ".join(peers), 1) if peers else cause
    for line in transport_lines:
        for pattern, cause in WARNINGS:
            found = re.search(pattern, line)
            if found:
                return cause.format(*found.groups())
    if transport_lines:
        return _plugin_cause(transport.parse(transport_lines)) or UNKNOWN
    return UNKNOWN


def _plugin_cause(summary):
    """What this rank's NCCL_DEBUG lines say about the net plugin, read as the transport
    verdict reads them; None when they say nothing wrong."""
    if summary.get("net_error"):
        missing = f" ({summary['missing_plugin']} was not found)" if summary.get("missing_plugin") else ""
        return (
            f"NCCL stopped: {summary['net_error']}{missing}; NCCL_NET names a network that no "
            f"loaded plugin provides (check NCCL_NET_PLUGIN and that the plugin loads)"
        )
    if summary.get("missing_plugin"):
        return (
            f"the NCCL/RCCL network plugin {summary['missing_plugin']} is missing (NCCL_NET_PLUGIN "
            f"names no file, or its directory is not on LD_LIBRARY_PATH)"
        )
    if summary.get("plugin_error"):
        return f"the NCCL/RCCL network plugin is there but failed: {summary['plugin_error']}"
    return None


def joining_timed_out(addr, port):
    return (
        f"this rank could not join at {addr}:{port}: rank 0 failed before opening its store "
        "there, another program holds that port, or a rank was never started"
    )


def check_master(addr, port, *, is_master):
    """The causes that can be proven before joining: an unresolvable master address, and on
    the master a port someone else holds. Returns an error message or None."""
    try:
        socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        return f"MASTER_ADDR {addr!r} does not resolve on {socket.gethostname()}: {error.strerror}"
    if not is_master:
        return None
    probe = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    try:
        # torch's store binds with SO_REUSEADDR too, so only a live listener makes this fail.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("", port))
    except OSError as error:
        return f"MASTER_PORT {port} is in use on {socket.gethostname()}: {error.strerror}"
    finally:
        probe.close()
    return None
