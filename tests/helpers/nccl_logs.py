"""The NCCL_DEBUG=INFO logs the smoke suite's tests read (tests/data/nccl/*.log; each file's
header names the upstream sources)."""

from pathlib import Path

NCCL_LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl"
