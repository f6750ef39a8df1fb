"""A check's verdict: one word, one line saying why, and what the check measured. The record
is the report's own (hpcml_facts.Verdict, so that the builder reads smoke.json with the same
class); the checks import it from here.

Example: Verdict.judged(ok, "busbw 81.0 GB/s >= 80.75 GB/s", measured_gbs=81.0).to_json()
"""

from hpcml_facts import ERROR, FAIL, NONE, NOT_MEASURED, PASS, Verdict

__all__ = ["ERROR", "FAIL", "NONE", "NOT_MEASURED", "PASS", "Verdict"]
