"""A check's verdict: one word, one line saying why, and what the check measured. smoke.json
keeps each as {"verdict": ..., "why": ..., more fields}; `to_json` gives exactly that."""

from dataclasses import dataclass, field

PASS = "pass"
FAIL = "fail"
NONE = "none"  # nothing to judge here (no GPU, no reference, no MPI launcher)
NOT_MEASURED = "not measured"  # the run did not measure what the reference is for
ERROR = "error"  # the run stopped on an error before its checks were done


@dataclass(frozen=True)
class Verdict:
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
