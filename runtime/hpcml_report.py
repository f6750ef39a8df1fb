"""The smoke suite's report (`smoke.json`), the one record that passes back from an image to
the builder: where the run ran, what the image is, the all-reduce rows and each check's
Verdict. The smoke suite writes it; the builder reads it (hpcml smoke, publish, verify),
through hpcml_facts, which carries these names too. Standard library only.

Example: SmokeReport.from_json(json.loads(text), "smoke.json").named(FAIL)
"""

from dataclasses import dataclass, field

from hpcml_json import FactsError, strings, take

PASS = "pass"
FAIL = "fail"
NONE = "none"  # nothing to judge here (no GPU, no reference, no MPI launcher)
NOT_MEASURED = "not measured"  # the run did not measure what the reference is for
ERROR = "error"  # the run stopped on an error before its checks were done


@dataclass(frozen=True)
class Verdict:
    """A check's verdict: one word, one line saying why, and what the check measured;
    smoke.json keeps each as {"verdict": ..., "why": ..., more fields}."""

    verdict: str  # one of the five above
    why: str
    details: dict = field(default_factory=dict)  # more fields for smoke.json: nets, threshold, ...

    @classmethod
    def passed(cls, why, **details):
        return cls(PASS, why, details)

    @classmethod
    def failed(cls, why, **details):
        return cls(FAIL, why, details)

    @classmethod
    def judged(cls, ok, why, **details):
        """Passed when ``ok``, else failed."""
        return cls(PASS if ok else FAIL, why, details)

    @classmethod
    def none(cls, why, **details):
        return cls(NONE, why, details)

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "why": self.why, **self.details}

    @classmethod
    def from_json(cls, data, where):
        verdict, why = take(data, "verdict", (str,), where), take(data, "why", (str,), where, default="")
        if verdict is None:
            raise FactsError(f"{where}: verdict: missing")
        return cls(verdict, why, {k: v for k, v in data.items() if k not in ("verdict", "why")})


@dataclass(frozen=True)
class Machine:
    """Where a smoke run ran."""

    hosts: tuple
    nodes: int
    ranks: int
    ranks_per_node: int
    launcher: str | None  # slurm, torchrun, mpirun, ... (None: one process by hand)
    backend: str | None  # nccl or gloo (None: stopped before joining)
    device: str
    cpus: int | None
    kernel: str
    site: str | None

    def to_json(self) -> dict:
        return {**vars(self), "hosts": list(self.hosts)}

    @classmethod
    def from_json(cls, data, where):
        text, number = (str,), (int,)
        return cls(
            strings(data, "hosts", where),
            *(take(data, key, number, where, default=0) for key in ("nodes", "ranks", "ranks_per_node")),
            take(data, "launcher", text, where),
            take(data, "backend", text, where),
            take(data, "device", text, where, default=""),
            take(data, "cpus", number, where),
            take(data, "kernel", text, where, default=""),
            take(data, "site", text, where),
        )


@dataclass(frozen=True)
class SmokeReport:
    """A smoke run's report: where it ran, what the image is, the all-reduce rows, each check's
    verdict and the run's."""

    created: str
    command: tuple  # the smoke suite's arguments
    machine: Machine
    image: dict  # the image's provenance labels, short names
    versions: dict  # python, torch, deepspeed, ...: None where absent
    allreduce: tuple  # rows: bytes, count, dtype, time_us, algbw_gbs, busbw_gbs, wrong
    checks: dict  # name -> Verdict, in the order they ran
    verdict: str  # pass, fail or none
    schema: int = 1

    def to_json(self) -> dict:
        return {
            "schema": self.schema,
            "created": self.created,
            "command": list(self.command),
            "machine": self.machine.to_json(),
            "image": dict(self.image),
            "versions": dict(self.versions),
            "allreduce": list(self.allreduce),
            "checks": {name: result.to_json() for name, result in self.checks.items()},
            "verdict": self.verdict,
        }

    @classmethod
    def from_json(cls, data, where):
        checks = take(data, "checks", (dict,), where, default={})
        verdict = take(data, "verdict", (str,), where)
        if verdict is None:
            raise FactsError(f"{where}: verdict: missing")
        return cls(
            take(data, "created", (str,), where, default=""),
            strings(data, "command", where),
            Machine.from_json(take(data, "machine", (dict,), where, default={}), f"{where}: machine"),
            dict(take(data, "image", (dict,), where, default={})),
            dict(take(data, "versions", (dict,), where, default={})),
            tuple(take(data, "allreduce", (list,), where, default=[])),
            {name: Verdict.from_json(check, f"{where}: checks: {name}") for name, check in checks.items()},
            verdict,
            take(data, "schema", (int,), where, default=1),
        )

    def named(self, verdict) -> dict:
        """{check name: why} of the checks with this verdict."""
        return {name: result.why for name, result in self.checks.items() if result.verdict == verdict}
