"""Two nodes for real (issue 16): a Slurm cluster of two nodes on this machine (network
namespaces n1 and n2 on a bridge, tests/helpers/twonode_cluster.py): its names and decoys, the
site's multi-node settings, DeepSpeed's master address, and a node that dies mid-job."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_builder
from helpers.child_signals import default_signals
from helpers.slurm_jobs import C10D_NO_NAME, NEEDS_TWO_NODES, WRAPPER, job_env, run_batch, wait_for

pytestmark = NEEDS_TWO_NODES


@pytest.mark.parametrize("nodes", [1, 2])
def test_the_sites_multi_node_settings_apply_on_two_nodes_only(two_nodes, site_file, apptainer, cpu_image, nodes):
    show = (
        'echo "$HPCML_TEST_MULTI_NODE|$OMPI_MCA_btl_tcp_if_include|${LD_LIBRARY_PATH%%:*}|'
        '$(test -d /hpcml-multi-node-bind && echo bound)"'
    )
    env = dict(job_env(two_nodes, site_file, apptainer), SING_IMAGE=str(cpu_image))
    shown = subprocess.run(
        ["srun", f"-N{nodes}", "--ntasks-per-node=1", WRAPPER, "exec", "sh", "-c", show],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    # one node: the image's own library path ahead (Apptainer's), nothing of the site's
    expected = f"applied|{two_nodes.subnet}.0/24|/opt/hpcml-test-lib|bound" if nodes == 2 else "||/.singularity.d/libs|"
    assert shown.stdout.split("\n")[:-1] == [expected] * nodes


def test_two_idle_nodes_with_their_own_names(two_nodes):
    states = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %t"], env=two_nodes.env, capture_output=True, text=True, timeout=30
    )
    assert states.stdout.split("\n")[:2] == ["n1 idle", "n2 idle"], states.stdout + states.stderr
    names = subprocess.run(["srun", "-N2", "hostname"], env=two_nodes.env, capture_output=True, text=True, timeout=60)
    assert names.returncode == 0, names.stderr
    assert sorted(names.stdout.split()) == ["n1", "n2"]


def test_each_nodes_first_address_is_a_decoy_the_other_node_cannot_reach(two_nodes):
    """The trap the launches below must miss: DeepSpeed's multi-node runner (and many hand-made
    scripts) take the first address of `hostname -I` on the first node as the master."""
    first = subprocess.run(
        ["srun", "-N2", "--ntasks-per-node=1", "sh", "-c", 'echo "$(hostname) $(hostname -I)"'],
        env=two_nodes.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert first.returncode == 0, first.stderr
    shown = {line.split()[0]: line.split()[1:] for line in first.stdout.splitlines()}
    assert shown == {node: [two_nodes.decoys[node], two_nodes.addresses[node]] for node in ("n1", "n2")}
    reach = 'exec 3<>"/dev/tcp/$1/$2" && echo reached'
    port = str(two_nodes.slurmd_port)
    for address, reached in ((two_nodes.decoys["n1"], False), (two_nodes.addresses["n1"], True)):
        tried = subprocess.run(
            ["srun", "-w", "n2", "-N1", "-n1", "timeout", "10", "bash", "-c", reach, "bash", address, port],
            env=two_nodes.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ("reached" in tried.stdout) is reached, (address, tried.stdout, tried.stderr)


NAMES = """
import json, socket, sys
names = {}
for address in sys.argv[1:]:
    for where in ((address, 0), ("::ffff:" + address, 0, 0, 0)):
        try:
            names[where[0]] = socket.getnameinfo(where, socket.NI_NAMEREQD)[0]
        except socket.gaierror as error:
            names[where[0]] = f"error {error.errno}"
print(socket.gethostname(), json.dumps(names))
"""


def test_each_node_names_the_nodes_addresses_in_the_form_torch_asks(two_nodes, site_file, apptainer, cpu_image):
    """Issue 30: every rank printed "[c10d] The hostname of the client socket cannot be
    retrieved. err=-3". c10d's sockets are dual-stack: it names each peer by getnameinfo() on
    the IPv4-mapped form (::ffff:198.18.0.11), which glibc's /etc/hosts backend does not match
    to an IPv4 line; the lookup then went to a DNS server the nodes cannot reach (-3,
    EAI_AGAIN). In the container on each node, both forms of both nodes' addresses have their
    node's name (NI_NAMEREQD: no name is an error, not the number)."""
    env = dict(job_env(two_nodes, site_file, apptainer), SING_IMAGE=str(cpu_image))
    asked = subprocess.run(
        ["srun", "-N2", "--ntasks-per-node=1", WRAPPER, "exec", "python", "-c", NAMES, *two_nodes.addresses.values()],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert asked.returncode == 0, asked.stderr
    expected = {}
    for node, address in two_nodes.addresses.items():
        expected.update({address: node, f"::ffff:{address}": node})
    shown = {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1]) for line in asked.stdout.splitlines()}
    assert shown == {"n1": expected, "n2": expected}


# The scripts `jobscript` writes, under every launch mode on one node and two, run unchanged
# on the local site's twin (and on every other site's): tests/cluster/test_site_twins.py.


# deepspeed.init_distributed() as a DeepSpeed training script calls it, with a spy on DeepSpeed's
# MPI discovery; each rank says what it was given, what the process group used, and the sum.
DS_WHERE = """
import json, os, socket
import deepspeed
import torch
import torch.distributed as dist
from deepspeed.comm import comm

given = {name: os.environ.get(name) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
discovered = []
discover = comm.mpi_discovery
comm.mpi_discovery = lambda *args, **kwargs: (discovered.append(True), discover(*args, **kwargs))[1]
deepspeed.init_distributed(dist_backend="gloo")
total = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(total)
store = dist.distributed_c10d._get_default_store()
while hasattr(store, "underlying_store"):
    store = store.underlying_store
print("ds-where " + json.dumps({
    "host": socket.gethostname(), "rank": dist.get_rank(), "world": dist.get_world_size(), "given": given,
    "used": {name: os.environ.get(name) for name in given}, "store": [store.host, store.port],
    "store_address": socket.gethostbyname(store.host), "discovered": bool(discovered), "sum": total.item()}),
    flush=True)
dist.destroy_process_group()
"""


def test_deepspeed_across_nodes_takes_the_master_launchenv_set(two_nodes, site_file, apptainer, cpu_image, tmp_path):
    """Issue 30: `--launch deepspeed` on two nodes is the srun launch, and says so. DeepSpeed's
    init_distributed() finds RANK, MASTER_ADDR and the rest that launchenv set, so its MPI
    discovery never runs, and its process group meets at n1's address on the bridge, not at
    the decoy that comes first in n1's `hostname -I` (which n2 cannot reach)."""
    program = tmp_path / "ds_where.py"
    program.write_text(DS_WHERE)
    script = tmp_path / "job.sh"
    written = run_builder(
        "jobscript",
        "cpu",
        "--site",
        "local",
        "--nodes",
        "2",
        "--tasks-per-node",
        "2",
        "--launch",
        "deepspeed",
        "--time",
        "00:10:00",
        "--image",
        cpu_image,
        "--wrapper",
        WRAPPER,
        "--out",
        script,
        "--",
        program,
    )
    assert written.returncode == 0, written.stderr
    assert "launch deepspeed (as srun: ranks from launchenv, no DeepSpeed launcher)" in written.stderr
    text = script.read_text()
    assert "# --launch deepspeed across nodes runs what --launch srun runs" in text
    assert text.rstrip().splitlines()[-1].endswith(f"exec python -m launchenv -- python {program}")
    *state, output = run_batch(script, job_env(two_nodes, site_file, apptainer), tmp_path, tmp_path / "job.log")
    assert state == ["COMPLETED", "0:0"], output[-6000:]
    ranks = sorted(
        (json.loads(line.split(" ", 1)[1]) for line in output.splitlines() if line.startswith("ds-where ")),
        key=lambda rank: rank["rank"],
    )
    assert [(r["rank"], r["host"], r["world"], r["sum"]) for r in ranks] == [
        (0, "n1", 4, 10.0),
        (1, "n1", 4, 10.0),
        (2, "n2", 4, 10.0),
        (3, "n2", 4, 10.0),
    ], output[-4000:]
    for rank in ranks:
        assert rank["discovered"] is False  # DeepSpeed's MPI discovery never ran
        assert rank["used"] == rank["given"]  # it took launchenv's variables as they were
        assert rank["given"]["MASTER_ADDR"] == "n1" and rank["given"]["RANK"] == str(rank["rank"])
        assert rank["store"] == ["n1", int(rank["given"]["MASTER_PORT"])]
        assert rank["store_address"] == two_nodes.addresses["n1"] != two_nodes.decoys["n1"]
    assert C10D_NO_NAME not in output, output[-4000:]


# DeepSpeed's own MPI discovery, run by hand: first as upstream wrote it (rank 0's first word of
# `hostname -I`), then the image's copy (the deepspeed block's fix_master_address: `hostname -s`).
DS_DISCOVERY = """
import inspect, json, os, socket, textwrap
from deepspeed.comm import comm

source = textwrap.dedent(inspect.getsource(comm.mpi_discovery))
upstream = {}
exec(source.replace("hostname -s", "hostname -I"), vars(comm), upstream)
chosen = {}
for name, discover in (("upstream", upstream["mpi_discovery"]), ("image", comm.mpi_discovery)):
    os.environ.pop("MASTER_ADDR", None)
    discover(distributed_port=29500, verbose=False)
    chosen[name] = os.environ["MASTER_ADDR"]
print("ds-discovery " + json.dumps({
    "host": socket.gethostname(), "rank": int(os.environ["RANK"]), "world": int(os.environ["WORLD_SIZE"]),
    "image_asks": "hostname -s" if "hostname -s" in source else "hostname -I", "chosen": chosen}), flush=True)
"""


def test_deepspeeds_own_mpi_discovery_would_take_the_decoy_as_upstream_wrote_it(
    two_nodes, site_file, apptainer, cpu_image, tmp_path
):
    """Why the multi-node deepspeed launch keeps DeepSpeed's MPI discovery out of it, and why the
    image patches it anyway: under srun --mpi=pmix, without launchenv, upstream's discovery makes
    the first address of rank 0's `hostname -I` the master, the decoy n2 cannot reach; the
    image's copy asks `hostname -s` and gets n1, which resolves to n1's address on the bridge."""
    program = tmp_path / "ds_discovery.py"
    program.write_text(DS_DISCOVERY)
    env = dict(job_env(two_nodes, site_file, apptainer), SING_IMAGE=str(cpu_image))
    ran = subprocess.run(
        ["srun", "--mpi=pmix", "-N2", "--ntasks-per-node=1", WRAPPER, "exec", "python", str(program)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,  # two ranks importing DeepSpeed, while make test's other stream may hold both cores
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    ranks = sorted(
        (json.loads(line.split(" ", 1)[1]) for line in ran.stdout.splitlines() if line.startswith("ds-discovery ")),
        key=lambda rank: rank["rank"],
    )
    assert [(r["rank"], r["host"], r["world"]) for r in ranks] == [(0, "n1", 2), (1, "n2", 2)], ran.stdout
    for rank in ranks:
        assert rank["image_asks"] == "hostname -s"
        assert rank["chosen"] == {"upstream": two_nodes.decoys["n1"], "image": "n1"}


def _traces(netns_prefix, conf):
    """The namespaces, links and daemons the cluster with this name prefix and this slurm.conf
    could leave (only its own: the other case of the test may run beside it, in another worker)."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=30).stdout
    daemons = subprocess.run(["pgrep", "-af", "slurm.conf"], capture_output=True, text=True, timeout=30).stdout
    suffix = netns_prefix.split("-")[1]
    return (
        [line for line in netns.splitlines() if line.startswith(netns_prefix)]
        + [line for line in links.splitlines() if suffix in line]
        + [line for line in daemons.splitlines() if conf in line]
    )


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_the_make_target_cluster_leaves_nothing_behind_when_stopped(stop):
    # as `make two-nodes` starts it
    started = subprocess.Popen(
        [sys.executable, "-m", "helpers.twonode_cluster"],
        stdin=subprocess.PIPE,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH="tests"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_signals,  # stopped by SIGINT: not ignored here, even under `make test &`
    )
    try:
        first = started.stdout.readline()  # blocks until up, or it failed
        assert first.startswith("two nodes up: n1 198.1"), first + started.stdout.read()
        conf = started.stdout.readline().split("SLURM_CONF=")[1].split()[0]
        shown = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %t"],
            env=dict(os.environ, SLURM_CONF=conf),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert shown.stdout.split("\n")[:2] == ["n1 idle", "n2 idle"]
        prefix = first.split("(netns ")[1].split(")")[0].rsplit("-", 1)[0]
        assert _traces(prefix, conf)
        started.send_signal(stop)
        assert started.wait(timeout=60) == 0
        assert _traces(prefix, conf) == [] and not Path(conf).parent.exists()
    finally:
        if started.poll() is None:  # a failed assertion: still clean up
            started.send_signal(signal.SIGTERM)
            try:
                started.wait(timeout=60)
            except subprocess.TimeoutExpired:
                started.kill()


def test_a_node_that_dies_mid_job_ends_the_job_with_a_diagnosis_naming_it(
    two_nodes, site_file, apptainer, cpu_image, tmp_path
):
    """n2 dies (slurmd, job step and ranks killed at once) in the middle of a long all-reduce:
    the ranks on n1 see their connections to it broken within the collective timeout, say so
    naming n2, and exit; the job ends as NODE_FAIL once slurmctld declares n2 down (this
    cluster's SlurmdTimeout, 20 s) instead of hanging. --no-requeue: Slurm would otherwise
    queue the job again, as test_examples shows for training that resumes."""
    script = tmp_path / "job.sh"
    endless_allreduce = ("-m", "smoke", "allreduce", "--sizes", "64K", "--iters", "1000000", "--op-timeout", "30")
    written = run_builder(
        "jobscript",
        "cpu",
        "--site",
        "local",
        "--nodes",
        "2",
        "--tasks-per-node",
        "2",
        "--launch",
        "srun",
        "--time",
        "00:10:00",
        "--image",
        cpu_image,
        "--wrapper",
        WRAPPER,
        "--out",
        script,
        "--",
        *endless_allreduce,
    )
    assert written.returncode == 0, written.stderr
    env = job_env(two_nodes, site_file, apptainer)
    log = tmp_path / "job.log"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--no-requeue", f"--output={log}", str(script)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 300
        while "rank(s) on 2 node(s)" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)  # well into the timed all-reduces
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
