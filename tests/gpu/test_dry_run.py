"""`make test-gpu DRY=1` here, with no GPU: the plan from the recipes (helpers/gpu_bundle.py
--plan-only), every check assembled and printed, nothing run. And what the plan and the op
table must hold for a real run: every op a CUDA image promises has DeepSpeed tests or a reason,
and the parts split the promise without a gap."""

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT, TARGETS
from helpers import representative

OP_TESTS = ROOT / "tests" / "gpu" / "deepspeed_op_tests.yaml"


def bundle(target, out):
    """`make gpu-bundle`'s program with --plan-only, in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "helpers.gpu_bundle", target, "--plan-only", "--out", str(out)],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'tests'}:{ROOT}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def plan_only(target, out):
    made = bundle(target, out)
    assert made.returncode == 0, made.stderr
    return json.loads((out / target / "plan.json").read_text())


@pytest.fixture(scope="module")
def h100_bundle(tmp_path_factory):
    """h100-cuda's plan, made once for the dry runs here (they only read it)."""
    out = tmp_path_factory.mktemp("gpu-bundle")
    return out, plan_only("h100-cuda", out)


def dry_run(bundle, work, *options):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "gpu", "tests/gpu", "--gpu-dry",
         "--gpu-bundle", str(bundle), "--gpu-work", str(work), *options],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_makefile_runs_the_gpu_tests_with_the_hosts_python():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # under make test
    shown = subprocess.run(
        ["make", "--no-print-directory", "-n", "test-gpu", "TARGET=h100-cuda", "OPS=2/3", "DRY=1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 0, shown.stderr
    line = " ".join(shown.stdout.replace("\\\n", " ").replace('"', "").split())
    assert line.startswith("python3 -m pytest -p no:cacheprovider -m gpu tests/gpu --gpu-target h100-cuda"), line
    assert "--gpu-ops 2/3" in line and "--gpu-dry" in line, line


@pytest.mark.parametrize("ops", representative.cases({part: (part,) for part in ("1/3", "2/3", "3/3")}, keep=["1/3"]))
def test_the_dry_run_prints_every_check_of_a_part_and_passes(h100_bundle, tmp_path, ops):
    bundle_dir, plan = h100_bundle
    result = dry_run(bundle_dir, tmp_path / "work", "--gpu-target", "h100-cuda", "--gpu-ops", ops)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    summary = (tmp_path / "work" / "h100-cuda" / "summary.md").read_text()
    rows = dict(re.findall(r"^\| ([^|]+) \| ([A-Z ]+) \|", summary, re.M))
    for example in ("ddp_cnn", "lightning_ddp", "hf_trainer", "accelerate_loop", "ds_zero"):
        assert rows.get(f"example {example} (+ resume)") == "DRY", rows
    assert rows["bundle"] == "PASS" and rows["DeepSpeed ops built"] == "DRY", rows
    assert rows[f"preflight with {plan['other_arch']['target']}'s facts (must fail)"] == "DRY", rows
    built = re.search(r"^- ops_built: (.*)$", summary, re.M).group(1).split(", ")
    assert {"cpu_adam", "fused_adam", "utils"} <= set(built), built
    tested = re.search(r"^- ops_tested: (.*)$", summary, re.M).group(1).split(", ")
    assert {row.split(": ")[1] for row in rows if row.startswith("DeepSpeed tests: ")} == set(tested)


def test_a_missing_bundle_is_one_line_and_status_2(tmp_path):
    result = dry_run(tmp_path / "none", tmp_path / "work", "--gpu-target", "h100-cuda")
    assert result.returncode == 2, result.stdout[-2000:]
    assert "make gpu-bundle TARGET=h100-cuda" in result.stdout + result.stderr


def test_an_op_outside_the_promise_is_refused_in_one_line(h100_bundle, tmp_path):
    result = dry_run(h100_bundle[0], tmp_path / "work", "--gpu-target", "h100-cuda", "--gpu-ops", "fp_quantizer")
    assert result.returncode == 2, result.stdout[-2000:]
    assert (
        "--gpu-ops fp_quantizer: ['fp_quantizer'] not among h100-cuda's promised ops" in result.stdout + result.stderr
    )


def test_a_cpu_target_has_no_gpu_plan(tmp_path):
    made = bundle("cpu", tmp_path)
    assert made.returncode == 2 and "make test-gpu proves CUDA targets; cpu is cpu" in made.stderr, made.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("target", [t for t in TARGETS if t.endswith("-cuda")])
def test_every_op_a_cuda_image_promises_has_tests_or_a_reason_and_one_part(tree, target):
    facts = tree.target(target)
    assert facts.torch.flavour == "cuda"
    import yaml  # here: a GPU host collects this file too

    table = yaml.safe_load(OP_TESTS.read_text())["ops"]
    for op in facts.deepspeed.promised:
        entry = table.get(op)
        assert entry, f"{target} promises {op}; {OP_TESTS.name} has no entry for it"
        assert bool(entry.get("paths")) != bool(entry.get("reason")), (op, entry)
        assert entry.get("part") in (1, 2, 3), (op, entry)
