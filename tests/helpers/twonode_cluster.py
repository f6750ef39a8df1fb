"""A real two-node Slurm cluster on one machine: each node a network namespace (its own
address on a bridge) with its own hostname (UTS namespace) and /etc/hosts (mount namespace),
one slurmd in each; munged and slurmctld stay in the root namespace. Every file lives under
a temporary directory, ports are private, addresses come from 198.18.0.0/15 (reserved for
network tests), and the names carry a per-run suffix so that a crashed run cannot collide.

Needs root. See the "Two Slurm nodes on one machine" notes for why each piece is as it is.
"""

import atexit
import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

from helpers.slurm_cluster import COMMON_SETTINGS, Cluster, _free_port

ROOT = Path(__file__).resolve().parents[2]
NODES = ("n1", "n2")
DECOY_NET = "198.19.254"  # inside each namespace only, never on the bridge


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def _free_subnet():
    """198.18.0 unless an interface holds an address there already (a crashed run's bridge,
    a run beside this one): then the next /24 of 198.18.0.0/15 that none uses."""
    used = set(re.findall(r"inet 198\.(1[89])\.(\d+)\.", _ip("-4", "-o", "addr", "show").stdout))
    for index in range(2 * 256):
        second, third = 18 + index // 256, index % 256
        if (str(second), str(third)) not in used:
            return f"198.{second}.{third}"
    raise RuntimeError("no free /24 in 198.18.0.0/15")


def hosts_file(names):
    """/etc/hosts for the nodes: each name's IPv4 address and the same address in its
    IPv4-mapped IPv6 form (::ffff:198.18.0.11), which a site's DNS also names.

    torch's c10d sockets are dual-stack (IPv6 first, AI_V4MAPPED), and on each one it opens or
    accepts it asks getnameinfo() for the peer's name in that mapped form. glibc's files backend
    does not match an IPv4 line to a mapped address (its DNS backend unmaps it first), so the
    lookup went on to the DNS server of /etc/resolv.conf, which these namespaces cannot reach,
    and every rank printed "[c10d] The hostname of the client socket cannot be retrieved.
    err=-3" (EAI_AGAIN). A reverse lookup that finds no name (NXDOMAIN) is silent."""
    lines = [f"{address} {name}\n" for name, address in names.items()]
    lines += [f"::ffff:{address} {name}\n" for name, address in names.items()]
    return "".join(lines)


class TwoNodes(Cluster):
    def __init__(self, root: Path, cpus=2, twin=None):
        """cpus: what each node tells Slurm it has; more than this machine's (the growth
        bench's 8 ranks a node) is taken as configured (config_overrides). twin: a
        site_twin.Twin, to shape the nodes and partitions as that site's (cpus from it)."""
        super().__init__(root)
        self.twin = twin
        self.cpus = twin.cpus if twin else cpus
        suffix = secrets.token_hex(3)  # interface names: 15 characters at most
        self.bridge = f"hmbr{suffix}"
        self.netns = {node: f"hpcml-{suffix}-{node}" for node in NODES}
        self.veths = {node: f"hmv{suffix}{i}" for i, node in enumerate(NODES)}
        self.subnet = None
        self.addresses = {}
        self.decoys = {}
        self.slurmd_pids = {}
        self.stopped = False

    def start(self, timeout=90):
        atexit.register(self.stop)  # an interrupted session still cleans up
        try:
            self._network()
            self._daemons(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _network(self):
        self.subnet = _free_subnet()
        gateway = f"{self.subnet}.1"
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, node in enumerate(NODES):
            ns, veth, peer = self.netns[node], self.veths[node], self.veths[node] + "p"
            self.addresses[node] = f"{self.subnet}.{11 + i}"
            _ip("netns", "add", ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
            _ip("link", "set", veth, "master", self.bridge, "up")
            _ip("link", "set", peer, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{self.addresses[node]}/24", "dev", peer)
            _ip("-n", ns, "link", "set", peer, "up")
            _ip("-n", ns, "link", "set", "lo", "up")  # no default route: the nodes reach
            # the subnet and nothing beyond
            # The decoy: an interface made inside the namespace, so it comes first in
            # `hostname -I` (as a blocked Ethernet port does on real nodes), with an address
            # the other node has no route to. Launches must not pick it.
            self.decoys[node] = f"{DECOY_NET}.{11 + i}"
            _ip("-n", ns, "link", "add", "decoy0", "type", "veth", "peer", "name", "decoy0p")
            _ip("-n", ns, "addr", "add", f"{self.decoys[node]}/32", "dev", "decoy0")
            _ip("-n", ns, "link", "set", "decoy0", "up")
            _ip("-n", ns, "link", "set", "decoy0p", "up")

    def _daemons(self, timeout):
        root = self.root
        host = socket.gethostname().split(".")[0]
        gateway = f"{self.subnet}.1"
        self.slurmd_port = _free_port()  # every slurmd listens there, on its node
        for folder in ("munge", "state", "log"):
            (root / folder).mkdir(mode=0o700, parents=True, exist_ok=True)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        sock = root / "munge" / "munge.socket"  # a path socket: reachable from every netns
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={sock}",
                f"--pid-file={root / 'munge' / 'pid'}",
                f"--seed-file={root / 'munge' / 'seed'}",
                f"--log-file={root / 'log' / 'munged.log'}",
            ],
        )
        self._wait(lambda: sock.exists(), 30, "munged socket")
        # the nodes' view of names: each other and the controller, nothing of the host's
        node_options = f"{self.twin.node_options()} " if self.twin else ""
        hosts = root / "hosts"
        hosts.write_text(hosts_file({"localhost": "127.0.0.1", host: gateway, **self.addresses}))
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=hpcmltwo",
                    f"SlurmctldHost={host}({gateway})",  # slurmctld refuses a name not its own
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={self.slurmd_port}",
                    f"AuthInfo=socket={sock}",
                    *COMMON_SETTINGS,
                    # a node that stops answering is declared down after 20 s (Slurm's default, 300 s,
                    # would make the node-death test wait five minutes for the same outcome)
                    "SlurmdTimeout=20",
                    f"StateSaveLocation={root / 'state'}",
                    f"SlurmdSpoolDir={root / 'spool-%n'}",
                    f"SlurmctldPidFile={root / 'slurmctld.pid'}",
                    f"SlurmdPidFile={root / 'slurmd-%n.pid'}",
                    f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={root / 'log' / 'slurmd-%n.log'}",
                    # a twin's nodes are the site's shape (cores, memory), taken as configured
                    *(["SlurmdParameters=config_overrides"] if self.twin or self.cpus > (os.cpu_count() or 2) else []),
                    *(self.twin.cluster_lines() if self.twin else []),
                    *(
                        f"NodeName={node} NodeAddr={address} CPUs={self.cpus} {node_options}State=UNKNOWN"
                        for node, address in self.addresses.items()
                    ),
                    *(
                        (self.twin and self.twin.partition_lines())
                        or ["PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"]
                    ),
                ]
            )
            + "\n"
        )
        gres = self.twin.gres_conf() if self.twin else ""
        if gres:
            (root / "gres.conf").write_text(gres)
        # PMIx's per-step client folders are named by job and step only: nodes that share
        # /tmp would collide, so each node sees a folder of its own at one path
        pmix = root / "pmix"
        for folder in (pmix, *(root / f"pmix-{node}" for node in NODES)):
            folder.mkdir()
        (root / "mpi.conf").write_text(f"PMIxCliTmpDirBase={pmix}\n")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        for node in NODES:
            self._slurmd(node)
        self._wait(self._idle, timeout, "two idle nodes in sinfo")

    def _slurmd(self, node):
        # nsenter, not `ip netns exec`: that remounts /sys, which hides /sys/fs/cgroup and
        # slurmd fails "Unable to initialize cgroup plugin". unshare and sh exec, so the
        # process we hold is slurmd itself.
        root = self.root
        self._spawn(
            f"slurmd-{node}",
            [
                "nsenter",
                f"--net=/run/netns/{self.netns[node]}",
                "unshare",
                "--uts",
                "--mount",
                "--propagation",
                "private",
                # a /dev/shm of its own, as each real node has: DeepSpeed's shared-memory all-reduce
                # names its segments by MASTER_ADDR and MASTER_PORT, the same on every node of a job
                "sh",
                "-c",
                'hostname "$1" && mount --bind "$2" /etc/hosts && mount --bind "$4" "$5" && '
                "mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm && "
                'exec slurmd -D -N "$1" -f "$3"',
                "sh",
                node,
                str(root / "hosts"),
                str(self.conf),
                str(root / f"pmix-{node}"),
                str(root / "pmix"),
            ],
        )
        self.slurmd_pids[node] = self.processes[-1].pid

    def kill_node(self, node):
        """The node dies: SIGKILL to everything in its network namespace (slurmd, job steps,
        ranks), so its peers see their connections closed, as when a node panics."""
        self._kill_all_in(self.netns[node])
        self.processes = [p for p in self.processes if p.pid != self.slurmd_pids[node]]

    def revive_node(self, node, timeout=90):
        """Its slurmd again, until the node answers the controller (ReturnToService=2 takes
        it back if it was marked down); a job still on it keeps it allocated."""
        self._slurmd(node)
        subprocess.run(
            ["scontrol", "update", f"nodename={node}", "state=resume"], env=self.env, capture_output=True, timeout=30
        )
        self._wait(
            lambda: self._states().get(node) in ("idle", "alloc", "mix", "comp"), timeout, f"{node} answering again"
        )

    def _kill_all_in(self, ns):
        for _ in range(10):
            pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split()]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            time.sleep(0.3)

    @contextlib.contextmanager
    def hosts_without(self, node, name):
        """For the block, `node` cannot resolve `name`: a copy of the nodes' hosts file without
        it, bound over /etc/hosts in that node's mount namespace (slurmd's, which its job steps
        and the containers in them share), then unbound."""
        hosts = self.root / "hosts"
        view = self.root / f"hosts-{node}-without-{name}"
        view.write_text(
            "".join(line for line in hosts.read_text().splitlines(keepends=True) if line.split()[1:] != [name])
        )
        enter = ["nsenter", "-t", str(self.slurmd_pids[node]), "-m"]
        subprocess.run([*enter, "mount", "--bind", str(view), "/etc/hosts"], check=True, timeout=30)
        try:
            yield
        finally:
            subprocess.run([*enter, "umount", "/etc/hosts"], check=True, timeout=30)

    def site_file(self, **settings):
        """The local site as the wrapper reads it (HPCML_SITE_FILE), with this cluster's subnet
        as the one Open MPI's TCP transport may use (else it also tries the decoys and the
        all-reduce dies) and any other `HPCML_...=value` settings given."""
        text = (ROOT / "wrappers" / "sites" / "local.sh").read_text()
        env = settings.pop("HPCML_MULTI_NODE_ENV", "")
        only_ours = f"OMPI_MCA_btl_tcp_if_include={self.subnet}.0/24"
        settings["HPCML_MULTI_NODE_ENV"] = f"('{only_ours}' {env})".replace(" )", ")")
        for name, value in settings.items():
            text, count = re.subn(rf"^{name}=.*$", f"{name}={value}", text, flags=re.M)
            if count != 1:
                raise ValueError(f"{name} is not a setting of wrappers/sites/local.sh")
        path = self.root / "two-nodes.sh"
        path.write_text(text)
        return path

    def _states(self):
        """Node name to sinfo's short state ("idle", "alloc", "idle*" when not responding)."""
        result = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env, capture_output=True, text=True, timeout=30
        )
        return dict(line.split() for line in result.stdout.splitlines() if len(line.split()) == 2)

    def _idle(self):
        states = self._states()
        return all(states.get(node) == "idle" for node in NODES)

    def stop(self):
        """Daemons, what runs in the namespaces, the namespaces, links and files: all gone.
        Safe to call twice and after a start() that failed halfway."""
        if self.stopped:
            return
        self.stopped = True
        super().stop()  # munged, slurmctld, slurmd, by pid
        existing = set(_ip("netns", "list", check=False).stdout.split())
        for ns in self.netns.values():
            if ns not in existing:
                continue
            self._kill_all_in(ns)  # job steps, ranks, stray sruns
            _ip("netns", "del", ns, check=False)  # takes the veth peer inside with it
        for link in (*self.veths.values(), self.bridge):
            _ip("link", "del", link, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def main():
    """`make two-nodes`: start the cluster, say how to use it, stop it at Enter or Ctrl-C."""
    import signal
    import sys
    import tempfile

    if os.geteuid() != 0:
        print("error: two-nodes: namespaces and a bridge need root; run it as root", file=sys.stderr)
        return 2
    cluster = TwoNodes(Path(tempfile.mkdtemp(prefix="hpcml-two-nodes-")))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    cluster.start()
    try:
        nodes = ", ".join(f"{n} {a} (netns {cluster.netns[n]})" for n, a in cluster.addresses.items())
        print(
            f"two nodes up: {nodes}\n"
            f"in another shell:  export SLURM_CONF={cluster.conf} HPCML_SITE_FILE={cluster.site_file()}; "
            "sinfo; srun -N2 hostname\n"
            "press Enter (or Ctrl-C) to stop them and remove every trace",
            flush=True,
        )
        try:
            sys.stdin.readline()
        except KeyboardInterrupt:
            pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
