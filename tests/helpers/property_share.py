"""How many examples a property test draws. Each test names its own count, the one `make test`
(and CI) draws; `make unit` sets PROPERTY_SHARE=0.25 and draws a quarter of it, at least
10, so the fast loop runs every property test on fewer examples (docs/testing.md)."""

import os

MIN_EXAMPLES = 10


def _share() -> float:
    raw = os.environ.get("PROPERTY_SHARE", "1")
    try:
        share = float(raw)
    except ValueError:
        share = -1.0
    if not 0 < share <= 1:
        raise SystemExit(f"PROPERTY_SHARE is {raw!r}: expected a number above 0 and at most 1")
    return share


SHARE = _share()


def examples(count: int) -> int:
    """``count`` examples in the full run, the share of them (at least MIN_EXAMPLES) otherwise."""
    return max(MIN_EXAMPLES, round(count * SHARE)) if SHARE < 1 else count
