"""All-reduce sweep: the exact sum checked at every size, then timed like nccl-tests."""

import time

from . import bandwidth

# The largest integer each dtype holds exactly: rank-valued inputs (rank + 1) are used while
# their sum n(n+1)/2 fits, so a missing rank shows; beyond that every rank sends ones.
EXACT_LIMIT = {"float32": 1 << 24, "float16": 1 << 11, "bfloat16": 1 << 8}


def default_dtypes(backend):
    return ["float32", "bfloat16", "float16"] if backend == "nccl" else ["float32"]


def run(session, sizes, dtypes, warmup, iters):
    import torch
    import torch.distributed as dist

    n = session.world
    rows = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        itemsize = torch.tensor([], dtype=dtype).element_size()
        ranked = n * (n + 1) // 2 <= EXACT_LIMIT[dtype_name]
        mine, expected = (session.rank + 1, n * (n + 1) // 2) if ranked else (1, n)
        for size in sizes:
            count = max(1, size // itemsize)
            nbytes = count * itemsize
            session.doing(f"all-reduce of {nbytes} bytes ({count} x {dtype_name}), checking the sum")
            buffer = torch.full((count,), float(mine), dtype=dtype, device=session.device)
            session.wait(dist.all_reduce(buffer, async_op=True))
            wrong = int((buffer != expected).sum().item())
            # Timed on zeros: sums stay zero, so nothing overflows and the result is checkable.
            buffer.zero_()
            session.doing(f"all-reduce of {nbytes} bytes ({dtype_name}), {warmup} warm-up and {iters} timed")
            for _ in range(warmup):
                session.wait(dist.all_reduce(buffer, async_op=True))
            _sync(session)
            start = time.perf_counter()
            if session.backend == "nccl":  # stream-ordered: queue them all, as nccl-tests does
                works = [dist.all_reduce(buffer, async_op=True) for _ in range(iters)]
                for work in works:
                    session.wait(work)
            else:  # gloo may run queued ops on several threads
                for _ in range(iters):
                    session.wait(dist.all_reduce(buffer, async_op=True))
            _sync(session)
            elapsed = (time.perf_counter() - start) / iters
            wrong += int((buffer != 0).sum().item())
            # The slowest rank sets the pace, as in nccl-tests.
            elapsed = session.agree(elapsed, "max")
            wrong = int(session.agree(wrong, "sum"))
            algbw = bandwidth.algbw_gbs(nbytes, elapsed)
            rows.append(
                {
                    "dtype": dtype_name,
                    "bytes": nbytes,
                    "count": count,
                    "time_us": elapsed * 1e6,
                    "algbw_gbs": algbw,
                    "busbw_gbs": bandwidth.allreduce_busbw_gbs(algbw, n),
                    "wrong": wrong,
                    "expected_sum": expected,
                }
            )
    return rows


def _sync(session):
    if session.backend == "nccl":
        import torch

        torch.cuda.synchronize()
