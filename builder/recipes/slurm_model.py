"""The `slurm` section of a site file: how a job asks this site's Slurm for what it needs."""

import re
from dataclasses import dataclass

from .section import Section


@dataclass(frozen=True)
class Account:
    """slurm.account: the project a job bills, as the site writes it."""

    example: str  # project_465000000
    pattern: str  # the form, a regular expression
    required: bool = False  # the site refuses jobs that name none

    @classmethod
    def from_yaml(cls, spec: Section):
        try:
            re.compile(spec["pattern"])
        except re.error as error:
            raise spec.error(
                ("pattern",),
                f"not a regular expression ({error}); expected the "
                "form of the site's projects, such as '^project_[0-9]{9}$'",
            ) from None
        if not re.fullmatch(spec["pattern"], spec["example"]):
            raise spec.error(
                ("example",),
                f"{spec['example']!r} does not match the pattern "
                f"{spec['pattern']!r}; expected an example of the site's form",
            )
        return cls(spec["example"], spec["pattern"], spec.get("required", False))


@dataclass(frozen=True)
class Qos:
    name: str
    max_time: str  # "" when the QoS sets no time limit of its own
    max_gpus: int  # per job; 0 when it sets no limit
    test: bool = False  # a QoS for short tests: only when asked for (--qos)

    @classmethod
    def from_yaml(cls, spec: dict):
        return cls(spec["name"], spec.get("max_time", ""), spec.get("max_gpus", 0), spec.get("test", False))


@dataclass(frozen=True)
class Partition:
    name: str
    max_nodes: int
    max_time: str  # any form of sbatch's --time (2-00:00:00, 90)
    max_gpus: int  # per node
    whole_nodes: bool  # takes only jobs that use whole nodes
    test: bool  # short tests: chosen only when named
    note: str
    max_job_gpus: int = 0  # per job, all nodes together; 0: no limit of its own
    min_job_gpus: int = 0  # per job, all nodes together; 0: no floor
    min_nodes: int = 1  # per job; 1: no floor (Karolina's qgpu_big takes only jobs above 16 nodes)
    only_when_named: bool = False  # not for tests, yet never chosen unless named (a preemptible queue)

    @property
    def automatic(self) -> bool:
        """Whether a job that names no partition may be given this one."""
        return not (self.test or self.only_when_named)

    @classmethod
    def from_yaml(cls, name: str, spec: Section, gpus_per_node: int):
        """``gpus_per_node``: a partition's max_gpus when it says none, the node's GPUs."""
        partition = cls(
            name,
            spec["max_nodes"],
            spec["max_time"],
            spec.get("max_gpus", gpus_per_node),
            spec.get("whole_nodes", False),
            spec.get("test", False),
            spec.get("note", ""),
            spec.get("max_job_gpus", 0),
            spec.get("min_job_gpus", 0),
            spec.get("min_nodes", 1),
            spec.get("only_when_named", False),
        )
        partition.check(spec)
        return partition

    def check(self, spec: Section):
        """A floor above its ceiling: no job could fit, and every request would be refused with
        a reason that hides this; one located line instead."""
        if self.max_job_gpus and self.min_job_gpus > self.max_job_gpus:
            raise spec.error(
                ("min_job_gpus",),
                f"min_job_gpus {self.min_job_gpus} > max_job_gpus {self.max_job_gpus}; "
                "expected a floor at or below the ceiling",
            )
        if self.min_nodes > self.max_nodes:
            raise spec.error(
                ("min_nodes",),
                f"min_nodes {self.min_nodes} > max_nodes {self.max_nodes}; expected a floor at or below the ceiling",
            )


@dataclass(frozen=True)
class Slurm:
    account: Account | None  # the form of the project a job bills; None when not said
    gpu_request: str  # gres | gpus-per-node
    gres_type: str  # the TYPE of --gres=gpu:TYPE:N ("" for --gres=gpu:N)
    mem: str  # per_gpu | whole_node | none
    qos: tuple  # (Qos, ...) in order of preference; () when none is asked
    constraint: str  # sbatch --constraint ("" when none)
    time: str  # a job script's --time when its user gives none ("" when not said)
    sbatch: tuple  # sbatch options every job here carries
    partitions: tuple  # (Partition, ...) in order of preference

    @classmethod
    def from_yaml(cls, spec: Section, gpus_per_node: int):
        return cls(
            account=Account.from_yaml(spec.part("account")) if spec.get("account") else None,
            gpu_request=spec.get("gpu_request", "gres"),
            gres_type=spec.get("gres_type", ""),
            mem=spec.get("mem", "none"),
            qos=tuple(Qos.from_yaml(q) for q in spec.get("qos", ())),
            constraint=spec.get("constraint", ""),
            time=spec.get("time", ""),
            sbatch=tuple(spec.get("sbatch", ())),
            partitions=tuple(
                Partition.from_yaml(name, spec.part("partitions").part(name), gpus_per_node)
                for name in spec.get("partitions", {})
            ),
        )
