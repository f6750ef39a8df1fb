"""`make test-gpu` (tests/gpu/test_gpu.py): options, the time budget, and the one summary at the
end; a pytest plugin the tests' conftest.py loads.

Runs on a GPU host with the host's own Python (torch, nvcc), no Apptainer and no network,
from the files `make gpu-bundle` prepared (tests/helpers/gpu_bundle.py). Standard library and
pytest only: the builder's dependencies need not be there.
"""

import json
import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_addoption(parser):
    group = parser.getgroup("gpu", "make test-gpu")
    group.addoption("--gpu-target", default="h100-cuda", help="the CUDA target to prove (default h100-cuda)")
    group.addoption("--gpu-bundle", default=str(ROOT / ".gpu-bundle"), help="where make gpu-bundle wrote")
    group.addoption(
        "--gpu-ops",
        default="all",
        help="the promised ops to build and test: all, a part (1/3, 2/3, 3/3: deepspeed_op_tests.yaml's `part`) "
        "or a comma-separated list; the ops the examples and the smoke suite's engines need are always built",
    )
    group.addoption("--gpu-budget", type=float, default=540, help="seconds for the whole run (default 540)")
    group.addoption("--gpu-work", default=str(ROOT / ".gpu-work"), help="scratch: venv, build, runs")
    group.addoption("--gpu-out", help="folder for summary.json and summary.md (default: the work folder)")
    group.addoption(
        "--gpu-dry", action="store_true", help="no GPU needed: check the plan and bundle, print what would run"
    )


class Summary:
    """One row per check: what passed, failed, was skipped or not run, and why."""

    def __init__(self, budget):
        self.started, self.budget, self.rows, self.facts = time.monotonic(), budget, [], {}

    def left(self):
        return self.budget - (time.monotonic() - self.started)

    def add(self, check, result, seconds, detail=""):
        self.rows.append({"check": check, "result": result, "seconds": round(seconds, 1), "detail": detail})

    def markdown(self):
        lines = [f"- {name}: {value}" for name, value in self.facts.items()]
        lines += ["", "| check | result | s | detail |", "|---|---|---|---|"]
        for row in self.rows:
            detail = row["detail"].replace("|", "/").replace("\n", " ")
            lines.append(f"| {row['check']} | {row['result']} | {row['seconds']} | {detail} |")
        return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def summary(request):
    return request.config._gpu_summary


def pytest_configure(config):
    config._gpu_summary = Summary(config.getoption("--gpu-budget"))


def pytest_terminal_summary(terminalreporter, config):
    summary = config._gpu_summary
    if not summary.rows:
        return
    terminalreporter.section("make test-gpu: summary")
    terminalreporter.write(summary.markdown())
    out = Path(config.getoption("--gpu-out") or Path(config.getoption("--gpu-work")) / config.getoption("--gpu-target"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps({"facts": summary.facts, "rows": summary.rows}, indent=1) + "\n")
    (out / "summary.md").write_text(summary.markdown())
    terminalreporter.write_line(f"summary written to {out}{os.sep}summary.md")
