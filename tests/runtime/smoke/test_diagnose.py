"""smoke.diagnose: the likely cause of a failed run, from the error and the NCCL log lines, and
the checks of the master's address and port."""

import sys

import pytest
from conftest import ROOT
from helpers.nccl_logs import NCCL_LOGS

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import diagnose  # noqa: E402


@pytest.mark.parametrize(
    "error, cause",
    [
        (
            "The IPv4 network addresses of (nohost.invalid, 29500) cannot be retrieved "
            "(gai error: -2 - Name or service not known)",
            "does not resolve",
        ),
        ("MASTER_PORT 29500 is in use on vm: Address already in use", "already in use"),
        (
            "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:5511",
            "exited early",
        ),
        ("Socket Timeout", "stuck"),
        ("something new", "unknown"),
    ],
)
def test_errors_map_to_a_likely_cause(error, cause):
    assert cause in diagnose.likely_cause(error)


def test_a_lost_peer_is_named_by_address_and_host():
    error = "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:5511"
    assert diagnose.likely_cause(error).startswith("the rank(s) at 127.0.0.1 (localhost) died or exited early")
    assert diagnose.likely_cause("Connection reset by peer").startswith("another rank died")


def test_a_missing_plugin_in_the_transport_lines_is_named():
    lines = (NCCL_LOGS / "lumi-no-plugin.log").read_text().splitlines()
    assert "plugin librccl-net.so is missing" in diagnose.likely_cause("unhandled system error", lines)


def test_the_master_checks_find_an_unresolvable_name_and_a_taken_port():
    import socket

    assert "does not resolve" in diagnose.check_master("no-such-host.invalid", 29500, is_master=False)
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert "is in use" in diagnose.check_master("127.0.0.1", port, is_master=True)
        assert diagnose.check_master("127.0.0.1", port, is_master=False) is None


def test_two_ranks_on_one_gpu_are_named_from_nccls_warning():
    """As NCCL 2.28.9 failed on an H200 under torchrun --nproc_per_node=2 with one GPU: the
    error says only "invalid usage"; the WARN line comes before the lines that unwind the call."""
    lines = [line for line in (NCCL_LOGS / "h200-duplicate-gpu.log").read_text().splitlines() if line[:1] != "#"]
    error = "DistBackendError: NCCL error in: NCCLUtils.cpp:93, invalid usage (run with NCCL_DEBUG=WARN for details)"
    assert diagnose.likely_cause(error, lines).startswith("ranks 0 and 1 share one GPU")
    assert diagnose.likely_cause(error, lines[-5:]).startswith("unknown")  # the last lines alone say nothing
