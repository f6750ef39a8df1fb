"""Bandwidth as nccl-tests defines it (doc/PERFORMANCE.md): algbw = bytes / time, and for
all-reduce busbw = algbw * 2(n-1)/n, the figure comparable with the hardware's link speed."""

from hpcml_facts import Reference

from .verdict import NOT_MEASURED, Verdict


def algbw_gbs(nbytes, seconds):
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0


def allreduce_busbw_gbs(algbw, ranks):
    return algbw * 2 * (ranks - 1) / ranks if ranks > 0 else 0.0


def pick_threshold(references, nodes, dtypes):
    """The site's reference (hpcml_facts.Reference) for this run's shape, as the report
    records it (Reference.for_run picks it), or None."""
    reference = Reference.for_run(references, nodes, dtypes)
    return reference.to_json() if reference else None


def judge(results, threshold):
    """Verdict for the busbw measured at the threshold's message size and dtype."""
    if threshold is None:
        return Verdict.none("the site has no all-reduce reference for this shape")
    dtype = threshold.get("dtype", "float32")
    row = next((r for r in results if r["dtype"] == dtype and r["bytes"] == threshold["bytes"]), None)
    if row is None:
        return Verdict(
            NOT_MEASURED, f"the sweep did not include {threshold['bytes']} bytes of {dtype}", {"threshold": threshold}
        )
    floor = threshold["busbw_gbs"] * (1 - threshold.get("tolerance", 0.05))
    margin = row["busbw_gbs"] / floor - 1
    passed = row["busbw_gbs"] >= floor
    why = (
        f"busbw {row['busbw_gbs']:.2f} GB/s {'>=' if passed else '<'} {floor:.2f} GB/s "
        f"({threshold['busbw_gbs']} GB/s reference less {threshold.get('tolerance', 0.05):.0%}); "
        f"margin {margin:+.1%}"
    )
    return Verdict.judged(
        passed, why, threshold=threshold, measured_gbs=row["busbw_gbs"], floor_gbs=floor, margin=margin
    )
