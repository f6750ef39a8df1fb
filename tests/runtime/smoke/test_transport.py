"""Which network NCCL/RCCL used, from NCCL_DEBUG=INFO logs in each form the current libraries
and aws-ofi-nccl print (tests/data/nccl/*.log; each file's header names the upstream sources),
and the verdict for a 2-node LUMI run."""

import sys

import pytest
from conftest import ROOT
from helpers.nccl_logs import NCCL_LOGS

sys.path.insert(0, str(ROOT / "runtime"))
from hpcml_facts import Network  # noqa: E402
from smoke import transport  # noqa: E402

LUMI = Network(transport="ofi", provider="cxi")
SAMPLES = [
    "lumi-netofi-old.log",
    "lumi-ofi-1.18-libfabric.log",
    "lumi-ofi-aws-libfabric.log",
    "nccl-ofi-libfabric.log",
    "lumi-socket-fallback.log",
    "lumi-net-forced-missing.log",
    "lumi-ofi-init-failed.log",
]


def _lines(name):
    return (NCCL_LOGS / name).read_text().splitlines()


def _ranks(name):
    """One summary per process of an interleaved sample, in the order they first speak."""
    return [transport.parse(lines) for lines in transport.processes(_lines(name)).values()]


def _line(text, host="nid005001:81234:81234", dev=0):
    return f"{host} [{dev}] NCCL INFO {text}"


def _fields(summary, *keys):
    return tuple(summary[key] for key in keys)


KEYS = ("net", "plugin", "plugin_version", "provider", "missing_plugin")


@pytest.mark.parametrize(
    "name, library, expected",
    [
        ("lumi-netofi-old.log", "RCCL 2.18.3+hip6.0", ("ofi", "AWS Libfabric", "aws-ofi-rccl 1.4.0", "cxi", None)),
        (
            "lumi-ofi-1.18-libfabric.log",
            "RCCL 2.22.3",  # no "Loaded" line: v8 path
            ("ofi", "Libfabric", "aws-ofi-nccl 1.18.0", "cxi", None),
        ),
        ("lumi-ofi-aws-libfabric.log", "RCCL 2.26.6", ("ofi", "AWS Libfabric", "aws-ofi-nccl 1.21.1", "cxi", None)),
        ("nccl-ofi-libfabric.log", "NCCL 2.27.7+cuda12.9", ("ofi", "OFI", "aws-ofi-nccl 1.21.1", "cxi", None)),
        ("lumi-socket-fallback.log", "RCCL 2.26.6", ("socket", None, None, None, "librccl-net.so")),
        (
            "lumi-net-forced-missing.log",
            "RCCL 2.26.6",
            (None, None, None, None, "/opt/aws-ofi-nccl/lib/librccl-net.so"),
        ),
        ("lumi-ofi-init-failed.log", "RCCL 2.22.3", ("socket", "aws-ofi-nccl", "aws-ofi-nccl 1.18.0", None, None)),
    ],
)
def test_each_sample_parses_to_the_network_plugin_and_provider(name, library, expected):
    whole = transport.parse(_lines(name))
    assert whole["library"] == library and _fields(whole, *KEYS) == expected
    ranks = _ranks(name)
    assert len(ranks) == 4  # 2 nodes x 2 ranks, interleaved
    assert [r["library"] for r in ranks] == [library, None, None, None]  # the banner is rank 0's
    assert all(_fields(r, *KEYS) == expected for r in ranks)


def test_the_errors_are_kept_for_the_verdict():
    forced = transport.parse(_lines("lumi-net-forced-missing.log"))
    assert forced["net_error"] == "Error: network AWS Libfabric not found." and forced["plugin_error"] is None
    failed = transport.parse(_lines("lumi-ofi-init-failed.log"))
    assert failed["plugin_error"] == "NET/OFI Unable to find a protocol that worked.  Failing initialization."
    assert failed["net_error"] is None
    for name in SAMPLES[:5]:
        assert _fields(transport.parse(_lines(name)), "plugin_error", "net_error") == (None, None)


@pytest.mark.parametrize("name", SAMPLES[:4])
def test_a_two_node_lumi_run_over_the_plugin_passes(name):
    verdict = transport.judge(_ranks(name), LUMI, nodes=2, backend="nccl")
    assert verdict.to_json() == {"verdict": "pass", "nets": ["ofi"], "why": "every rank used ofi (cxi)"}


def test_the_socket_fallback_fails_and_names_the_missing_plugin():
    verdict = transport.judge(_ranks("lumi-socket-fallback.log"), LUMI, nodes=2, backend="nccl")
    assert verdict.verdict == "fail" and verdict.details["nets"] == ["socket"]
    assert verdict.why.startswith("the site expects ofi between nodes but ranks used socket")
    assert "librccl-net.so was not found" in verdict.why and "LD_LIBRARY_PATH" in verdict.why


def test_a_forced_net_without_its_plugin_fails_naming_nccl_net_and_the_file():
    verdict = transport.judge(_ranks("lumi-net-forced-missing.log"), LUMI, nodes=2, backend="nccl")
    assert verdict.verdict == "fail" and verdict.details["nets"] == ["unknown"]
    why = verdict.why
    assert why.startswith("NCCL_NET='AWS Libfabric' names a network that no loaded plugin provides")
    assert '"Error: network AWS Libfabric not found."' in why
    assert "/opt/aws-ofi-nccl/lib/librccl-net.so was not found" in why and "NCCL_NET_PLUGIN" in why


def test_a_plugin_that_loads_but_finds_no_provider_fails_with_its_own_error():
    verdict = transport.judge(_ranks("lumi-ofi-init-failed.log"), LUMI, nodes=2, backend="nccl")
    assert verdict.verdict == "fail" and verdict.details["nets"] == ["socket"]
    assert "the net plugin is there but failed: NET/OFI Unable to find a protocol" in verdict.why
    assert "LD_LIBRARY_PATH" not in verdict.why


@pytest.mark.parametrize("name", SAMPLES)
def test_one_node_passes_whatever_the_log_says(name):
    verdict = transport.judge(_ranks(name), LUMI, nodes=1, backend="nccl")
    assert verdict.verdict == "pass" and "one node" in verdict.why


def test_mixed_ranks_fail_and_the_odd_ones_are_named():
    ofi, socket = _ranks("lumi-ofi-1.18-libfabric.log"), _ranks("lumi-socket-fallback.log")
    verdict = transport.judge(ofi[:2] + socket[2:], LUMI, nodes=2, backend="nccl")
    assert verdict.verdict == "fail" and verdict.details["nets"] == ["ofi", "socket"]
    assert "ranks used ofi, socket (ranks 2, 3 did not use ofi)" in verdict.why
    assert "librccl-net.so was not found" in verdict.why


def test_mixed_ranks_in_one_interleaved_log():
    """Node 1 found the plugin, node 2 did not: one srun output, split by host:pid."""
    ofi = [line for line in _lines("lumi-ofi-aws-libfabric.log") if line.startswith("nid005001:81235")]
    sockets = [line for line in _lines("lumi-socket-fallback.log") if line.startswith("nid005002:")]
    mixed = [line for pair in zip(ofi, sockets) for line in pair]
    ranks = list(transport.processes(mixed).values())
    assert [transport.parse(r)["net"] for r in ranks] == ["ofi", "socket", "socket"]
    verdict = transport.judge([transport.parse(r) for r in ranks], LUMI, nodes=2, backend="nccl")
    assert verdict.verdict == "fail" and "ranks 1, 2 did not use ofi" in verdict.why


def test_a_forced_net_missing_on_some_ranks_names_them():
    good, stopped = _ranks("lumi-ofi-aws-libfabric.log"), _ranks("lumi-net-forced-missing.log")
    verdict = transport.judge(good[:2] + stopped[2:], LUMI, nodes=2, backend="nccl")
    assert verdict.verdict == "fail" and "NCCL stopped on ranks 2, 3 with" in verdict.why


def test_a_wrong_provider_fails():
    lines = _lines("lumi-ofi-aws-libfabric.log")
    tcp = [line.replace("provider is cxi, fabric is cxi", "provider is tcp, fabric is 10.253.0.0/16") for line in lines]
    assert transport.parse(tcp)["provider"] == "tcp"
    verdict = transport.judge([transport.parse(tcp)] * 2, LUMI, nodes=2, backend="nccl")
    assert verdict.to_json() == {"verdict": "fail", "nets": ["ofi"], "why": "OFI provider tcp, the site expects cxi"}


@pytest.mark.parametrize(
    "lines, key, value",
    [
        # the library's banner across versions
        (["RCCL version 2.18.3+hip6.0 HEAD:2dee34c"], "library", "RCCL 2.18.3+hip6.0"),
        ([_line("RCCL version : 2.26.6-HEAD:f224e2c"), "HIP version  : 7.0.51831-a3e329ad8"], "library", "RCCL 2.26.6"),
        ([_line("NCCL version 2.27.7+cuda12.9")], "library", "NCCL 2.27.7+cuda12.9"),
        # the plugin's names for itself, and the network line alone or the channels alone
        ([_line("Using network AWS Libfabric")], "net", "ofi"),
        ([_line("Using network Libfabric")], "net", "ofi"),
        ([_line("Using network OFI")], "net", "ofi"),
        ([_line("Channel 00/0 : 1[1] -> 2[0] [send] via NET/Libfabric/0/GDRDMA")], "net", "ofi"),
        ([_line("Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0")], "net", "socket"),
        ([_line("NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)")], "net", "ofi"),
        ([_line("NET/Plugin: Loaded net plugin Libfabric (v9)")], "plugin", "Libfabric"),
        ([_line("NET/OFI Initializing aws-ofi-nccl 1.13.2-aws")], "plugin_version", "aws-ofi-nccl 1.13.2-aws"),
        (
            [_line("NET/OFI Using Libfabric version 2.2"), _line("NET/OFI Using transport protocol RDMA")],
            "plugin_version",
            None,
        ),
        # a missing plugin, in each NCCL generation's words
        (
            [_line("NET/Plugin : No plugin found (librccl-net.so), using internal implementation")],
            "missing_plugin",
            "librccl-net.so",
        ),
        (
            [
                _line(
                    "NET/Plugin : dlerror=librccl-net.so: cannot open shared object file: No such file or directory "
                    "No plugin found (librccl-net.so), using internal implementation"
                )
            ],
            "missing_plugin",
            "librccl-net.so",
        ),
        (
            [
                _line("NET/Plugin: No plugin found (librccl-net.so)"),
                _line("NET/Plugin: Using internal network plugin."),
            ],
            "missing_plugin",
            "librccl-net.so",
        ),
        (
            [_line("NET/Plugin: Could not find: librccl-net.so. Using internal network plugin.")],
            "missing_plugin",
            "librccl-net.so",
        ),
        ([_line("NET/Plugin: Could not find: libnccl-net.so. ")], "missing_plugin", "libnccl-net.so"),
        (
            [_line("NET/Plugin: Could not find: ofi librccl-net-ofi.so. Using internal net plugin.")],
            "missing_plugin",
            "librccl-net-ofi.so",
        ),
        (
            [
                _line("RCCL version 2.18.3+hip6.1 HEAD:2dee34c"),
                _line(
                    "NET/Plugin : Plugin load (librccl-net.so) returned 2 : librccl-net.so: cannot open shared object "
                    "file: No such file or directory"
                ),
                _line("NET/Plugin : No plugin found, using internal implementation"),
            ],
            "missing_plugin",
            "librccl-net.so",
        ),
        (
            [
                _line("NCCL version 2.18.6+cuda12.2"),
                _line("NET/Plugin : No plugin found, using internal implementation"),
            ],
            "missing_plugin",
            "libnccl-net.so",
        ),
        # found by an earlier name, loaded by a later one: nothing is missing
        (
            [
                _line("NET/Plugin: No plugin found (ofi)"),
                _line("NET/Plugin: Plugin name set by env to librccl-net-ofi.so"),
                _line("NET/Plugin: Loaded net plugin OFI (v8)"),
            ],
            "missing_plugin",
            None,
        ),
        # other plugins' misses are not the net plugin's
        (
            [
                _line("TUNER/Plugin: No plugin found (libnccl-tuner.so)"),
                _line("TUNER/Plugin: Could not find: librccl-tuner.so. Using internal tuner plugin."),
                _line("PROFILER/Plugin: Could not find: librccl-profiler.so. "),
            ],
            "missing_plugin",
            None,
        ),
        # the plugin is there but cannot load or start
        (
            [
                _line("NET/Plugin: libfabric.so.1: cannot open shared object file: No such file or directory"),
                _line("NET/Plugin: Using internal network plugin."),
            ],
            "plugin_error",
            "libfabric.so.1: cannot open shared object file: No such file or directory",
        ),
        (
            [
                _line(
                    "NET/Plugin: Plugin load returned 2 : libcxi.so.1: cannot open shared object file: No such file or "
                    "directory when loading librccl-net.so"
                )
            ],
            "plugin_error",
            "libcxi.so.1: cannot open shared object file: No such file or directory",
        ),
        (
            [
                _line(
                    "NET/Plugin: Failed to find ncclNetPlugin symbol (>= v5). ncclNetPlugin symbols v4 and lower are "
                    "not supported."
                )
            ],
            "plugin_error",
            "Failed to find ncclNetPlugin symbol (>= v5). ncclNetPlugin symbols v4 and lower are not supported.",
        ),
        ([_line("NET/Plugin: Failed to find ncclCollNetPlugin_v8 symbol.")], "plugin_error", None),
        # NCCL_NET naming a network nobody provides stops NCCL, whatever it probed before
        (
            [
                _line("NET/Socket : Using [0]hsn0:10.253.3.17<0>"),
                "",
                "[2026-01-21 09:12:44] nid005001:81234:81234 [0] plugin/net.cc:278 "
                "NCCL WARN Failed to initialize any NET plugin",
            ],
            "net",
            None,
        ),
        (
            [
                _line("NET/Socket : Using [0]hsn0:10.253.3.17<0>"),
                "",
                "[2026-01-21 09:12:44] nid005001:81234:81234 [0] plugin/net.cc:278 "
                "NCCL WARN Failed to initialize any NET plugin",
            ],
            "net_error",
            "Failed to initialize any NET plugin",
        ),
        # comment lines are not log lines
        (["# Using network Socket", "#  Rank  0 Group  0 Pid  81234 on nid005001 device  0"], "net", None),
    ],
)
def test_each_form_of_the_lines(lines, key, value):
    assert transport.parse(lines)[key] == value


def test_a_forced_net_error_from_nccl_2_27_names_nccl_net():
    lines = [
        _line("NET/Plugin: Could not find: libnccl-net.so. "),
        _line("NET/Socket : Using [0]hsn0:10.253.3.17<0>"),
        "",
        "nid005001:81234:81234 [0] plugin/net.cc:278 NCCL WARN Failed to initialize any NET plugin",
    ]
    verdict = transport.judge([transport.parse(lines)] * 2, LUMI, nodes=2, backend="nccl")
    assert verdict.verdict == "fail" and verdict.why.startswith("NCCL_NET names a network")
    assert "libnccl-net.so was not found" in verdict.why


def test_processes_split_an_interleaved_log_and_keep_continuation_lines():
    split = transport.processes(_lines("lumi-ofi-aws-libfabric.log"))
    assert list(split) == ["nid005001:81234", "nid005001:81235", "nid005002:55310", "nid005002:55311"]
    assert "Librccl path : /opt/rocm/lib/librccl.so.1" in split["nid005001:81234"]
    assert not any(line.startswith("#") for lines in split.values() for line in lines)
    stamped = transport.processes(_lines("lumi-net-forced-missing.log"))
    assert any("NCCL WARN Error: network" in line for line in stamped["nid005002:55311"])
    launcher = [
        "(RayWorkerWrapper pid=927) " + _line("Using network Socket", host="corona:927:927"),
        "(RayWorkerWrapper pid=233, ip=10.20.1.125) " + _line("Using network Socket", host="bootes:233:233"),
    ]
    assert list(transport.processes(launcher)) == ["corona:927", "bootes:233"]


# --- the failing rank's likely cause, read from its transport lines -----------------------------


def test_a_forced_network_without_its_plugin_is_the_likely_cause_of_a_failed_init():
    from smoke import diagnose

    lines = (NCCL_LOGS / "lumi-net-forced-missing.log").read_text().splitlines()
    first = next(iter(transport.processes(lines).values()))
    cause = diagnose.likely_cause("ncclInternalError: Internal check failed", first)
    assert cause.startswith("NCCL stopped: Error: network AWS Libfabric not found")
    assert "NCCL_NET_PLUGIN" in cause


def test_a_working_plugins_lines_are_no_alarm():
    """Its "Plugin name set by env to .../librccl-net.so" and the tuner's "Could not find:
    librccl-tuner.so" used to read as a missing plugin."""
    from smoke import diagnose

    for sample in ("lumi-ofi-1.18-libfabric.log", "lumi-ofi-aws-libfabric.log"):
        lines = (NCCL_LOGS / sample).read_text().splitlines()
        assert diagnose.likely_cause("something new", lines).startswith("unknown"), sample
    assert diagnose.likely_cause(
        "NCCL INFO TUNER/Plugin: Could not find: librccl-tuner.so. Using internal tuner plugin."
    ).startswith("unknown")


def _summary(name):
    return transport.parse((NCCL_LOGS / name).read_text().splitlines())


def test_transport_of_a_lumi_rank_with_the_plugin_stub_log():
    info = _summary("lumi-ofi.log")
    assert (info["library"], info["net"], info["provider"], info["missing_plugin"]) == (
        "RCCL 2.22.3+hip6.4",
        "ofi",
        "cxi",
        None,
    )
    assert info["plugin"] == "AWS Libfabric"


def test_transport_without_the_plugin_stub_log_fails_a_multi_node_lumi_run():
    info = _summary("lumi-no-plugin.log")
    assert info["net"] == "socket" and "librccl-net.so" in info["missing_plugin"]
    verdict = transport.judge([_summary("lumi-ofi.log"), info], LUMI, nodes=2, backend="nccl")
    assert verdict.verdict == "fail"
    assert "ofi, socket" in verdict.why and "LD_LIBRARY_PATH" in verdict.why


def test_transport_verdicts_for_ib_one_node_and_gloo():
    ib = [_summary("puhti-ib.log")] * 2
    assert transport.judge(ib, Network(transport="ib"), nodes=2, backend="nccl").verdict == "pass"
    assert transport.judge(ib, Network(transport="ofi"), nodes=2, backend="nccl").verdict == "fail"
    sockets = [_summary("lumi-no-plugin.log")]
    assert transport.judge(sockets, Network(transport="ofi"), nodes=1, backend="nccl").verdict == "pass"
    assert transport.judge([], Network(transport="ib"), nodes=2, backend="gloo").verdict == "none"
    wrong_provider = [dict(_summary("lumi-ofi.log"), provider="tcp")]
    assert transport.judge(wrong_provider, LUMI, nodes=2, backend="nccl").verdict == "fail"
