"""ReFrame for real on the two-node cluster (issue 80): the folder `hpcml reframe cpu --site
local` writes, run by ReFrame's own command line with the CPU image. The all-reduce and DDP
checks pass across both nodes and busbw reaches the perflog; a reference far above the
figure fails the run on performance; an image whose torch import fails fails its sanity."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_builder
from helpers.slurm_jobs import NEEDS_TWO_NODES, WRAPPER, job_env

pytestmark = NEEDS_TWO_NODES


def write_suite(out, cpu_image, *extra):
    written = run_builder(
        "reframe",
        "cpu",
        "--site",
        "local",
        "--nodes",
        "2",
        "--scheduler",
        "squeue",  # the test cluster keeps no accounting: no sacct
        "--time",
        "00:10:00",
        "--image",
        cpu_image,
        "--wrapper",
        WRAPPER,
        "--out",
        out,
        *extra,
    )
    assert written.returncode == 0, written.stderr
    return out


def reframe(out, env, prefix, *names):
    command = [str(Path(sys.executable).with_name("reframe")), "-C", str(out / "settings.py")]
    command += ["-c", str(out / "hpcml_checks.py"), "--prefix", str(prefix), "-r"]
    for name in names:
        command += ["-n", name]
    env = {key: value for key, value in env.items() if not key.startswith("RFM_")}
    return subprocess.run(command, cwd=prefix, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def suite(two_nodes, site_file, apptainer, cpu_image, tmp_path_factory):
    out = write_suite(tmp_path_factory.mktemp("reframe") / "checks", cpu_image)
    return out, job_env(two_nodes, site_file, apptainer)


def test_allreduce_and_ddp_pass_on_two_nodes_with_busbw_in_the_perflog(suite, tmp_path):
    out, env = suite
    ran = reframe(out, env, tmp_path, "^HpcmlAllreduce$", "^HpcmlDdp$")
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-2000:]
    assert "Ran 2/2 test case(s) from 2 check(s) (0 failure(s)" in ran.stdout
    print(ran.stdout, file=sys.stderr)  # docs/reframe.md shows it
    perflog = (tmp_path / "perflogs" / "local" / "jobs" / "HpcmlAllreduce.log").read_text()
    fields = perflog.splitlines()[-1].split("|")
    assert fields[0] == "pass", perflog
    busbw = float(fields[fields.index("GB/s") - 1])
    reference = json.loads((out / "hpcml_checks.json").read_text())["checks"]["allreduce"]["reference"]
    assert busbw >= reference["busbw_gbs"] * (1 - reference["tolerance"]) > 0
    # both nodes ran it: the job's allocation and the suite's own line say so
    job_out = next((tmp_path / "output").rglob("HpcmlAllreduce/rfm_job.out")).read_text()
    assert "smoke: 2 rank(s) on 2 node(s)" in job_out


def test_a_reference_far_above_the_figure_fails_on_performance(suite, tmp_path):
    out, env = suite
    params = json.loads((out / "hpcml_checks.json").read_text())
    params["checks"]["allreduce"]["reference"].update(busbw_gbs=1000.0, tolerance=0.05)
    high = tmp_path / "checks"
    high.mkdir()
    for name in ("settings.py", "hpcml_checks.py"):
        (high / name).write_text((out / name).read_text())
    (high / "jobs").symlink_to(out / "jobs")
    (high / "hpcml_checks.json").write_text(json.dumps(params))
    ran = reframe(high, env, tmp_path, "^HpcmlAllreduce$")
    assert ran.returncode != 0, ran.stdout[-4000:]
    assert "FAILURE INFO for HpcmlAllreduce" in ran.stdout and "performance" in ran.stdout, ran.stdout[-4000:]
    assert "busbw" in ran.stdout


def broken_env(folder, target="cpu"):
    """A project env whose torch shadows the image's and fails on import: a broken image, as
    every rank sees it (the wrapper puts the env's packages first)."""
    root = folder / "root"
    (root / "site-packages" / "torch").mkdir(parents=True)
    (root / "site-packages" / "torch" / "__init__.py").write_text('raise ImportError("torch broken on purpose")\n')
    (root / "bin").mkdir()
    check = root / "bin" / "hpcml-pyenv-check"
    check.write_text('#!/bin/sh\nexec "$@"\n')
    check.chmod(0o755)
    (root / "hpcml-pyenv.json").write_text(json.dumps({"target": target}))
    sqsh = folder / "broken.sqsh"
    subprocess.run(["mksquashfs", str(root), str(sqsh), "-noappend", "-quiet"], check=True, timeout=120)
    return sqsh


def test_an_image_whose_torch_import_fails_fails_its_sanity(two_nodes, site_file, apptainer, cpu_image, tmp_path):
    out = write_suite(tmp_path / "checks", cpu_image, "--pyenv", broken_env(tmp_path))
    env = job_env(two_nodes, site_file, apptainer)
    ran = reframe(out, env, tmp_path, "^HpcmlPreflight$")
    assert ran.returncode != 0, ran.stdout[-4000:]
    assert "FAILURE INFO for HpcmlPreflight" in ran.stdout and "sanity" in ran.stdout, ran.stdout[-4000:]
    # a failed check's files stay in its stage folder
    stage = tmp_path / "stage" / "local" / "jobs" / "builtin" / "HpcmlPreflight"
    assert "ImportError: torch broken on purpose" in (stage / "rfm_job.err").read_text()
    assert "hpcml check exit status: 1" in (stage / "rfm_job.out").read_text()
