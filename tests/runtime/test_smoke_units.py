"""The smoke suite's logic, on the host (no torch needed): sizes, bandwidth, thresholds,
transport logs, diagnoses, ds_report, site choice and the command line's bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import bandwidth, commands, config, diagnose, dscheck, report, sizes, transport  # noqa: E402
from smoke.verdict import Verdict  # noqa: E402

NCCL_LOGS = Path(__file__).parents[1] / "data" / "nccl"
LUMI_REFS = [
    {"nodes": 1, "bytes": 134217728, "dtype": "float16", "busbw_gbs": 125, "tolerance": 0.05, "source": "x"},
    {"nodes": 2, "bytes": 134217728, "dtype": "float16", "busbw_gbs": 85, "tolerance": 0.05, "source": "y"},
]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8:64", [8, 16, 32, 64]),
        ("1K:4K", [1024, 2048, 4096]),
        ("8:100", [8, 16, 32, 64]),
        ("128M", [134217728]),
        ("256MiB", [268435456]),
        ("2G,1K,1K", [1024, 2147483648]),
    ],
)
def test_sweeps_read_like_nccl_tests(text, expected):
    assert sizes.parse_sweep(text) == expected


@pytest.mark.parametrize("bad", ["", "0", "8:4", "12X", "-8", "8:", "1.5M"])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(sizes.SizeError):
        sizes.parse_sweep(bad)


def test_busbw_is_algbw_times_2_n_minus_1_over_n():
    algbw = bandwidth.algbw_gbs(134217728, 0.001)  # 128 MiB in 1 ms
    assert algbw == pytest.approx(134.217728)
    assert bandwidth.allreduce_busbw_gbs(algbw, 8) == pytest.approx(algbw * 14 / 8)
    assert bandwidth.allreduce_busbw_gbs(algbw, 2) == pytest.approx(algbw)
    assert bandwidth.allreduce_busbw_gbs(algbw, 1) == 0


def test_the_threshold_follows_the_runs_shape():
    assert bandwidth.pick_threshold(LUMI_REFS, 1, ["float16"])["busbw_gbs"] == 125
    assert bandwidth.pick_threshold(LUMI_REFS, 2, ["float32", "float16"])["busbw_gbs"] == 85
    assert bandwidth.pick_threshold(LUMI_REFS, 16, ["float16"])["nodes"] == 2  # most nodes below
    assert bandwidth.pick_threshold(LUMI_REFS, 2, ["float32"]) is None  # dtype not measured
    assert bandwidth.pick_threshold([], 1, ["float32"]) is None


def _row(busbw, nbytes=134217728, dtype="float16"):
    return {"dtype": dtype, "bytes": nbytes, "busbw_gbs": busbw}


def test_verdicts_apply_the_tolerance_and_give_the_margin():
    reference = LUMI_REFS[1]  # 85 GB/s, -5 % -> floor 80.75
    passed = bandwidth.judge([_row(81.0)], reference)
    assert passed.verdict == "pass" and passed.details["margin"] == pytest.approx(81 / 80.75 - 1)
    failed = bandwidth.judge([_row(80.5)], reference)
    assert failed.verdict == "fail" and "80.50 GB/s < 80.75 GB/s" in failed.why
    assert bandwidth.judge([_row(200, nbytes=1 << 20)], reference).verdict == "not measured"
    assert bandwidth.judge([_row(1)], None).verdict == "none"


def test_a_verdict_is_recorded_in_smoke_json_as_before(tmp_path):
    """smoke.json's checks stay {"verdict", "why", and what the check measured}."""
    checks = {
        "transport": Verdict.failed("ranks used socket", nets=["socket"]),
        "mpi4py": Verdict.none("launched by torchrun, not by MPI or srun"),
        "allreduce sum": Verdict.judged(True, "exact at all 4 sizes"),
    }
    path = tmp_path / "smoke.json"
    report.write_json(
        path, {"checks": {name: check.to_json() for name, check in checks.items()}, "verdict": report.overall(checks)}
    )
    assert json.loads(path.read_text()) == {
        "checks": {
            "transport": {"verdict": "fail", "why": "ranks used socket", "nets": ["socket"]},
            "mpi4py": {"verdict": "none", "why": "launched by torchrun, not by MPI or srun"},
            "allreduce sum": {"verdict": "pass", "why": "exact at all 4 sizes"},
        },
        "verdict": "fail",
    }
    assert report.verdict_lines({"mpi4py": checks["mpi4py"]}) == (
        "mpi4py  NONE         launched by torchrun, not by MPI or srun"
    )
    assert report.overall({"a": Verdict.passed("x"), "b": Verdict.none("y")}) == "pass"
    assert report.overall({"a": Verdict("error", "stopped")}) == "fail"


def test_a_program_is_run_with_one_timeout_rule(tmp_path):
    done = commands.run(["sh", "-c", "cat; echo out; echo err >&2; exit 3"], 10)
    assert (done.returncode, done.stdout, done.stderr, done.timed_out) == (3, "out\n", "err\n", False)
    late = commands.run(["sleep", "5"], 0.2)
    assert late.timed_out and late.late == "did not finish in 0.2 s"
    with pytest.raises(FileNotFoundError):
        commands.run([str(tmp_path / "no-such-program")], 10)


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
    verdict = transport.judge(
        [_summary("lumi-ofi.log"), info], {"transport": "ofi", "provider": "cxi"}, nodes=2, backend="nccl"
    )
    assert verdict.verdict == "fail"
    assert "ofi, socket" in verdict.why and "LD_LIBRARY_PATH" in verdict.why


def test_transport_verdicts_for_ib_one_node_and_gloo():
    ib = [_summary("puhti-ib.log")] * 2
    assert transport.judge(ib, {"transport": "ib"}, nodes=2, backend="nccl").verdict == "pass"
    assert transport.judge(ib, {"transport": "ofi"}, nodes=2, backend="nccl").verdict == "fail"
    sockets = [_summary("lumi-no-plugin.log")]
    assert transport.judge(sockets, {"transport": "ofi"}, nodes=1, backend="nccl").verdict == "pass"
    assert transport.judge([], {"transport": "ib"}, nodes=2, backend="gloo").verdict == "none"
    wrong_provider = [dict(_summary("lumi-ofi.log"), provider="tcp")]
    assert (
        transport.judge(wrong_provider, {"transport": "ofi", "provider": "cxi"}, nodes=2, backend="nccl").verdict
        == "fail"
    )


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


DS_REPORT = """\x1b[92m[OKAY]\x1b[0m
op name ................ installed .. compatible
--------------------------------------------------
cpu_adam ............... \x1b[92m[YES]\x1b[0m ...... \x1b[92m[OKAY]\x1b[0m
cpu_adagrad ............ [YES] ...... [OKAY]
fused_adam ............. [NO] ....... [NO]
deepspeed_not_implemented  [NO] ....... [OKAY]
"""


def test_ds_report_rows_are_read_through_colour_codes():
    assert dscheck.parse_report(DS_REPORT) == {
        "cpu_adam": (True, True),
        "cpu_adagrad": (True, True),
        "fused_adam": (False, False),
        "deepspeed_not_implemented": (False, True),
    }


LISTED = ["cpu_adagrad", "cpu_adam", "deepspeed_not_implemented", "fused_adam"]


def _fake_ds_report(tmp_path, monkeypatch):
    """A stand-in deepspeed package whose env_report prints DS_REPORT, found by this
    interpreter and its children (DeepSpeed is not on the host)."""
    package = tmp_path / "deepspeed"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "env_report.py").write_text(f"print({DS_REPORT!r}, end='')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))


def test_ds_report_needs_deepspeed_in_this_python(monkeypatch):
    monkeypatch.setattr(dscheck.importlib.util, "find_spec", lambda name: None)
    result = dscheck.check_ops(["cpu_adam"], LISTED, timeout=30)
    assert result.verdict == "fail" and "DeepSpeed is not installed for " in result.why


@pytest.mark.parametrize(
    "promised, listed, verdict, why",
    [
        (["cpu_adagrad", "cpu_adam"], LISTED, "pass", "exactly the 2 promised ops installed"),
        (["cpu_adagrad", "cpu_adam", "fused_adam"], LISTED, "fail", "promised but not installed: fused_adam"),
        (["cpu_adam"], LISTED, "fail", "installed but not in the image's labels: cpu_adagrad"),
        (["cpu_adagrad", "cpu_adam"], LISTED[:-1], "fail", "DeepSpeed lists ops the recipe does not know: fused_adam"),
        (
            ["cpu_adagrad", "cpu_adam"],
            LISTED + ["pin_memory"],
            "fail",
            "the recipe knows ops DeepSpeed does not list: pin_memory",
        ),
    ],
)
def test_ds_report_must_show_exactly_the_promise(tmp_path, monkeypatch, promised, listed, verdict, why):
    _fake_ds_report(tmp_path, monkeypatch)
    result = dscheck.check_ops(promised, listed, timeout=30)
    assert result.verdict == verdict and why in result.why, result


def test_an_op_compiled_by_any_path_fails_the_no_jit_guard(monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", "/users/own/setting")
    with pytest.raises(dscheck.JITBuild, match="compiled at run time into .*: cpu_adam"):
        with dscheck.no_jit():
            folder = Path(os.environ["TORCH_EXTENSIONS_DIR"])
            (folder / "cpu_adam").mkdir()
    assert os.environ["TORCH_EXTENSIONS_DIR"] == "/users/own/setting"  # restored
    assert not folder.exists()  # and cleaned up


def test_site_facts_come_from_the_wrapper_or_a_file(tmp_path):
    facts = {"site": "mahti", "network": {"transport": "ib"}, "allreduce": []}
    assert config.site(None, {}) == (None, {})  # nobody said: no references
    assert config.site(None, {"HPCML_SITE_FACTS": json.dumps(facts)}) == ("mahti", facts)
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(dict(facts, site="puhti")))
    assert config.site(path, {"HPCML_SITE_FACTS": json.dumps(facts)})[0] == "puhti"  # file first
    with pytest.raises(config.ConfigError, match=r"\$HPCML_SITE_FACTS:1: not valid JSON"):
        config.site(None, {"HPCML_SITE_FACTS": "{nope"})
    with pytest.raises(config.ConfigError, match="expected a JSON object with the site's name"):
        config.site(None, {"HPCML_SITE_FACTS": "[]"})


def test_the_facts_the_wrapper_carries_are_the_recipes_own(tree):
    """The site file's HPCML_SITE_FACTS, read back as bash reads it, is what the smoke suite
    gets; it matches the recipe (so a reference corrected there reaches the next run)."""
    lumi = tree.sites["lumi"]
    text = (ROOT / "wrappers" / "sites" / "lumi.sh").read_text()
    shown = subprocess.run(
        ["bash", "-c", f'{text}\nprintf %s "$HPCML_SITE_FACTS"'], capture_output=True, text=True, check=True
    ).stdout
    name, facts = config.site(None, {"HPCML_SITE_FACTS": shown})
    assert name == "lumi" and facts == lumi.smoke_facts
    assert facts["allreduce"][0]["busbw_gbs"] == 125 and facts["network"]["provider"] == "cxi"


def test_outside_an_image_nothing_is_promised():
    assert config.image()["deepspeed"]["promised_ops"] == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["bogus"], "invalid choice: 'bogus'"),
        (["allreduce", "--sizes", "8:4"], "largest size is below the smallest"),
        (["--iters", "0"], "is not a whole number of 1 or more"),
        (["--timeout", "soon"], "is not a number of seconds"),
        (["--dtypes", "float64"], "expected some of float32"),
        (["--site-facts", "{missing}"], "--site-facts {missing}: No such file or directory"),
        (["--site-facts", "{config}"], "expected a JSON object with the site's name"),
        (["--image-facts", "{missing}"], "no such file (expected the image's image.json)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    baked = tmp_path / "config.json"
    baked.write_text(json.dumps({"sites": {"local": {}}}))
    args = [a.format(config=baked, missing=tmp_path / "nope.json") for a in args]
    message = message.format(missing=tmp_path / "nope.json")
    result = subprocess.run(
        [sys.executable, "-m", "smoke", *args, "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT / "runtime"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()


# --- smoke.labels: what only the built image knows --------------------------------------


def fake_torch(cuda=None, hip=None, nccl=(2, 29, 7)):
    """torch's version attributes as a GPU build reports them (no GPU needed to read them)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        version=SimpleNamespace(cuda=cuda, hip=hip), cuda=SimpleNamespace(nccl=SimpleNamespace(version=lambda: nccl))
    )


def test_a_cuda_images_labels_name_nccl_cuda_and_the_oldest_driver():
    from smoke import labels

    image = {"gpu": {"archs": ["sm_80"], "min_driver": {"12": "525.60.13", "13": "580.65.06"}}}
    assert labels.measured(fake_torch(cuda="13.0"), image) == {
        "nccl.version": "2.29.7",
        "cuda.runtime": "13.0",
        "cuda.min_driver": "580.65.06",
    }
    assert labels.measured(fake_torch(hip="6.4.43484", nccl=2.22), {"gpu": {"archs": ["gfx90a"]}}) == {
        "rccl.version": "2.22",
        "rocm.hip": "6.4.43484",
    }


def test_a_cuda_release_without_a_known_driver_stops_the_build():
    from smoke import labels

    with pytest.raises(SystemExit, match="no oldest driver known for CUDA 14: add it to cuda_min_driver"):
        labels.measured(fake_torch(cuda="14.1"), {"gpu": {"min_driver": {"13": "580.65.06"}}})


def test_two_ranks_on_one_gpu_are_named_from_nccls_warning():
    """As NCCL 2.28.9 failed on an H200 under torchrun --nproc_per_node=2 with one GPU: the
    error says only "invalid usage"; the WARN line comes before the lines that unwind the call."""
    lines = [line for line in (NCCL_LOGS / "h200-duplicate-gpu.log").read_text().splitlines() if line[:1] != "#"]
    error = "DistBackendError: NCCL error in: NCCLUtils.cpp:93, invalid usage (run with NCCL_DEBUG=WARN for details)"
    assert diagnose.likely_cause(error, lines).startswith("ranks 0 and 1 share one GPU")
    assert diagnose.likely_cause(error, lines[-5:]).startswith("unknown")  # the last lines alone say nothing


def test_the_subgroups_are_made_as_tensor_and_data_parallelism_make_them():
    from smoke import groups

    made = dict(groups.plan(["n1", "n1", "n2", "n2"], [0, 1, 0, 1]))
    assert [name for name in made if name.startswith("new group")] == [
        f"new group {i} of all 4 ranks" for i in (1, 2, 3)
    ]
    assert made["the ranks on n1"] == [0, 1] and made["the ranks on n2"] == [2, 3]
    assert made["local rank 0 across nodes"] == [0, 2] and made["local rank 1 across nodes"] == [1, 3]
    one_node = dict(groups.plan(["n1", "n1"], [0, 1]))
    assert not [name for name in one_node if name.endswith("across nodes")]


def test_the_help_opens_with_what_the_suite_does():
    result = subprocess.run(
        [sys.executable, "-m", "smoke", "--help"],
        cwd=ROOT / "runtime",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    description = result.stdout.split("\n\n")[1]
    assert description.startswith("Smoke tests for an image on a machine: all-reduce correctness"), description
