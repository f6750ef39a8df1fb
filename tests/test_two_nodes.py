"""Two nodes for real (issue 16): a Slurm cluster of two nodes on this machine (network
namespaces n1 and n2 on a bridge, tests/twonode_cluster.py), and the job scripts that
`builder jobscript --site local --nodes 2` writes, submitted with sbatch, running the smoke
suite in the CPU image with two ranks on each node."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_builder
from slurm_jobs import NEEDS_TWO_NODES, WRAPPER, job_env, wait_for

pytestmark = NEEDS_TWO_NODES
QUICK = ("-m", "smoke", "all", "--sizes", "8:1M", "--warmup", "2", "--iters", "5")


@pytest.mark.parametrize("nodes", [1, 2])
def test_the_sites_multi_node_settings_apply_on_two_nodes_only(two_nodes, site_file, apptainer, cpu_image, nodes):
    show = ('echo "$HPCML_TEST_MULTI_NODE|$OMPI_MCA_btl_tcp_if_include|${LD_LIBRARY_PATH%%:*}|'
            '$(test -d /hpcml-multi-node-bind && echo bound)"')
    env = dict(job_env(two_nodes, site_file, apptainer), SING_IMAGE=str(cpu_image))
    shown = subprocess.run(["srun", f"-N{nodes}", "--ntasks-per-node=1", WRAPPER, "exec", "sh", "-c", show],
                           env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    # one node: the image's own library path ahead (Apptainer's), nothing of the site's
    expected = (f"applied|{two_nodes.subnet}.0/24|/opt/hpcml-test-lib|bound" if nodes == 2 else
                "||/.singularity.d/libs|")
    assert shown.stdout.split("\n")[:-1] == [expected] * nodes


def test_two_idle_nodes_with_their_own_names(two_nodes):
    states = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=two_nodes.env, capture_output=True,
                            text=True, timeout=30)
    assert states.stdout.split("\n")[:2] == ["n1 idle", "n2 idle"], states.stdout + states.stderr
    names = subprocess.run(["srun", "-N2", "hostname"], env=two_nodes.env, capture_output=True, text=True,
                           timeout=60)
    assert names.returncode == 0, names.stderr
    assert sorted(names.stdout.split()) == ["n1", "n2"]


def test_each_nodes_first_address_is_a_decoy_the_other_node_cannot_reach(two_nodes):
    """The trap the launches below must miss: DeepSpeed's multi-node runner (and many hand-made
    scripts) take the first address of `hostname -I` on the first node as the master."""
    first = subprocess.run(["srun", "-N2", "--ntasks-per-node=1", "sh", "-c", 'echo "$(hostname) $(hostname -I)"'],
                           env=two_nodes.env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    shown = {line.split()[0]: line.split()[1:] for line in first.stdout.splitlines()}
    assert shown == {node: [two_nodes.decoys[node], two_nodes.addresses[node]] for node in ("n1", "n2")}
    reach = 'exec 3<>"/dev/tcp/$1/$2" && echo reached'
    port = str(two_nodes.slurmd_port)
    for address, reached in ((two_nodes.decoys["n1"], False), (two_nodes.addresses["n1"], True)):
        tried = subprocess.run(["srun", "-w", "n2", "-N1", "-n1", "timeout", "10", "bash", "-c", reach, "bash",
                                address, port], env=two_nodes.env, capture_output=True, text=True, timeout=60)
        assert ("reached" in tried.stdout) is reached, (address, tried.stdout, tried.stderr)


def pmix_recipes(folder):
    """The recipe tree with the local site's Slurm offering PMIx, as Debian's Slurm does (with
    libpmix-dev): `--launch mpirun` then writes `srun --mpi=pmix` instead of the host's mpirun."""
    shutil.copytree(ROOT / "recipes", folder)
    site = folder / "sites" / "local.yaml"
    text, count = re.subn(r"^  slurm_mpi: none$", "  slurm_mpi: pmix", site.read_text(), flags=re.M)
    assert count == 1
    site.write_text(text)
    return folder


@pytest.mark.parametrize("launch", ["srun", "torchrun", "mpirun", "mpirun-pmix", "deepspeed"])
def test_the_two_node_script_runs_the_smoke_suite_on_both_nodes(two_nodes, site_file, apptainer, cpu_image, tmp_path,
                                                                launch):
    script = tmp_path / "job.sh"
    recipes = pmix_recipes(tmp_path / "recipes") if launch == "mpirun-pmix" else ROOT / "recipes"
    written = run_builder("jobscript", "cpu", "--recipes", recipes, "--site", "local", "--nodes", "2",
                          "--tasks-per-node", "2", "--launch", launch.split("-")[0], "--time", "00:10:00", "--image", cpu_image, "--wrapper", WRAPPER,
                          "--out", script, "--", *QUICK)
    assert written.returncode == 0, written.stderr
    assert ("srun --mpi=pmix " in script.read_text()) is (launch == "mpirun-pmix")
    env = job_env(two_nodes, site_file, apptainer)
    log = tmp_path / "job.log"
    started = time.monotonic()
    submitted = subprocess.run(["sbatch", "--parsable", f"--output={log}", str(script)], env=env,
                               cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    state = wait_for(submitted.stdout.strip().split(";")[0], env)
    took = time.monotonic() - started
    print(f"\n{launch} on 2 nodes x 2 ranks: sbatch to job end {took:.1f} s", file=sys.stderr)
    output = log.read_text() if log.exists() else ""
    assert state == ("COMPLETED", "0:0"), output[-8000:]
    # the smoke suite's default --out, relative to the job's working directory (sbatch's)
    report = json.loads((tmp_path / "smoke-report" / "smoke.json").read_text())
    machine = report["machine"]
    assert (machine["hosts"], machine["nodes"], machine["ranks"], machine["ranks_per_node"]) == \
        (["n1", "n2"], 2, 4, 2), output[-4000:]
    assert machine["launcher"] == {"srun": "slurm", "torchrun": "torchrun", "mpirun": "openmpi", "mpirun-pmix": "pmix",
                                   "deepspeed": "slurm"}[launch]
    assert report["checks"]["allreduce sum"]["verdict"] == "pass", report["checks"]
    assert all(row["wrong"] == 0 for row in report["allreduce"])
    assert report["verdict"] == "pass", json.dumps(report["checks"], indent=1)[-4000:]


def _traces(netns_prefix):
    """The namespaces, links and daemons a cluster with this name prefix could leave."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=30).stdout
    daemons = subprocess.run(["pgrep", "-af", "slurm.conf"], capture_output=True, text=True, timeout=30).stdout
    suffix = netns_prefix.split("-")[1]
    return ([line for line in netns.splitlines() if line.startswith(netns_prefix)]
            + [line for line in links.splitlines() if suffix in line]
            + [line for line in daemons.splitlines() if "hpcml-two-nodes-" in line])


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_the_make_target_cluster_leaves_nothing_behind_when_stopped(stop):
    started = subprocess.Popen([sys.executable, str(ROOT / "tests" / "twonode_cluster.py")], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        first = started.stdout.readline()                  # blocks until up, or it failed
        assert first.startswith("two nodes up: n1 198.1"), first + started.stdout.read()
        conf = started.stdout.readline().split("SLURM_CONF=")[1].split()[0]
        shown = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=dict(os.environ, SLURM_CONF=conf),
                               capture_output=True, text=True, timeout=30)
        assert shown.stdout.split("\n")[:2] == ["n1 idle", "n2 idle"]
        prefix = first.split("(netns ")[1].split(")")[0].rsplit("-", 1)[0]
        assert _traces(prefix)
        started.send_signal(stop)
        assert started.wait(timeout=60) == 0
        assert _traces(prefix) == [] and not Path(conf).parent.exists()
    finally:
        if started.poll() is None:                      # a failed assertion: still clean up
            started.send_signal(signal.SIGTERM)
            try:
                started.wait(timeout=60)
            except subprocess.TimeoutExpired:
                started.kill()


def test_a_node_that_dies_mid_job_ends_the_job_with_a_diagnosis_naming_it(
        two_nodes, site_file, apptainer, cpu_image, tmp_path):
    """n2 dies (slurmd, job step and ranks killed at once) in the middle of a long all-reduce:
    the ranks on n1 see their connections to it broken within the collective timeout, say so
    naming n2, and exit; the job ends as NODE_FAIL once slurmctld declares n2 down (this
    cluster's SlurmdTimeout, 20 s) instead of hanging. --no-requeue: Slurm would otherwise
    queue the job again, as test_examples shows for training that resumes."""
    script = tmp_path / "job.sh"
    endless_allreduce = ("-m", "smoke", "allreduce", "--sizes", "64K", "--iters", "1000000", "--op-timeout", "30")
    written = run_builder("jobscript", "cpu", "--site", "local", "--nodes", "2", "--tasks-per-node", "2",
                          "--launch", "srun", "--time", "00:10:00", "--image", cpu_image, "--wrapper", WRAPPER,
                          "--out", script, "--", *endless_allreduce)
    assert written.returncode == 0, written.stderr
    env = job_env(two_nodes, site_file, apptainer)
    log = tmp_path / "job.log"
    submitted = subprocess.run(["sbatch", "--parsable", "--no-requeue", f"--output={log}", str(script)], env=env,
                               cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 300
        while "rank(s) on 2 node(s)" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)                                   # well into the timed all-reduces
        killed = time.monotonic()
        two_nodes.kill_node("n2")
        state, _ = wait_for(job, env, timeout=180)
        took = time.monotonic() - killed
    finally:
        two_nodes.revive_node("n2")
    text = log.read_text()
    print(f"\nn2 killed mid all-reduce: job {state} {took:.1f} s later", file=sys.stderr)
    said = [line for line in text.splitlines() if "likely cause" in line]
    # the first rank to fail lost n2; a rank on n1 may then lose its neighbour on n1, which
    # exited on that error, and say so (its line points to the messages above)
    assert said and f"the rank(s) at {two_nodes.addresses['n2']} (n2) died" in said[0], text[-4000:]
    assert all(re.search(r"the rank\(s\) at 198\.1[89]\.\S+ \((n1|n2)\) died", line) for line in said), said
    assert state == "NODE_FAIL", text[-4000:]
