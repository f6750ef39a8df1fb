"""A real one-node Slurm cluster for the tests: munged, slurmctld and slurmd from Debian's
packages, with every file under a temporary directory and private ports.

Used by the `slurm` fixture; srun and friends find it through SLURM_CONF.
"""

import os
import socket
import subprocess
import time
from pathlib import Path


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# What every test cluster shares: munge, root, no cgroups, CPUs as the unit.
COMMON_SETTINGS = (
    "AuthType=auth/munge",
    "CredType=cred/munge",
    "SlurmUser=root",
    "SlurmdUser=root",
    "ProctrackType=proctrack/linuxproc",
    "TaskPlugin=task/none",
    "SelectType=select/cons_tres",
    "SelectTypeParameters=CR_CPU",
    "MpiDefault=none",
    "ReturnToService=2",
    "SchedulerType=sched/backfill",
)


class Cluster:
    def __init__(self, root: Path):
        self.root = root
        self.processes = []
        self.conf = root / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))

    def start(self, timeout=90):
        host = socket.gethostname().split(".")[0]
        for folder in ("munge", "state", "spool", "log"):
            (self.root / folder).mkdir(mode=0o700, parents=True, exist_ok=True)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        sock = self.root / "munge" / "munge.socket"
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={sock}",
                f"--pid-file={self.root / 'munge' / 'pid'}",
                f"--seed-file={self.root / 'munge' / 'seed'}",
                f"--log-file={self.root / 'log' / 'munged.log'}",
            ],
        )
        self._wait(lambda: sock.exists(), 30, "munged socket")
        cpus = os.cpu_count() or 2
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=hpcmltest",
                    f"SlurmctldHost={host}",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    f"AuthInfo=socket={sock}",
                    *COMMON_SETTINGS,
                    f"StateSaveLocation={self.root / 'state'}",
                    f"SlurmdSpoolDir={self.root / 'spool'}",
                    f"SlurmctldPidFile={self.root / 'slurmctld.pid'}",
                    f"SlurmdPidFile={self.root / 'slurmd.pid'}",
                    f"SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={self.root / 'log' / 'slurmd.log'}",
                    f"NodeName={host} CPUs={cpus} State=UNKNOWN",
                    "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
                ]
            )
            + "\n"
        )
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf)])
        self._wait(self._idle, timeout, "an idle node in sinfo")
        return self

    def _idle(self):
        result = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True, text=True)
        return result.returncode == 0 and "idle" in result.stdout

    def _spawn(self, name, argv):
        log = open(self.root / "log" / f"{name}.out", "w")
        self.processes.append(
            subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        )

    def _wait(self, ready, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            dead = [p.args[0] for p in self.processes if p.poll() is not None]
            if dead:
                break
            time.sleep(0.5)
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted((self.root / "log").glob("*")))
        self.stop()
        raise RuntimeError(f"Slurm test cluster: no {what} within {timeout} s\n{logs}")

    def stop(self):
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
        self.processes = []
