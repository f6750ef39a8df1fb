"""Collectives on process groups of their own, made the way tensor, pipeline and expert
parallelism make them.

Plain DDP runs on the default group only. Frameworks that split a job create more groups,
and each group's first collective sets up a communicator of its own: on LUMI's ROCm 7 images
that first all-reduce hung in 13 of 17 four-node runs while DDP on the same nodes passed
(lumi-ai-factory/laifs-container-recipes issue 44). So the suite creates, in order:

- three new groups of all ranks, one after another (that issue's reproducer);
- one group per node (ranks that share a node, as tensor parallelism groups them);
- on more than one node, one group per local rank index across the nodes (as data and
  pipeline parallelism group them).

Every rank creates every group (torch requires it); each rank then runs one all-reduce on
each group it is in, bounded by --op-timeout, and checks the sum. A hang becomes the suite's
usual diagnosis, naming the group.
"""

import time

from .verdict import Verdict

NEW_GROUPS = 3


def plan(hosts, local_ranks):
    """[(name, ranks)] for the groups, from each rank's host and local rank (lists by rank)."""
    everyone = list(range(len(hosts)))
    groups = [(f"new group {i} of all {len(everyone)} ranks", everyone) for i in range(1, NEW_GROUPS + 1)]
    nodes = list(dict.fromkeys(hosts))
    for host in nodes:
        groups.append((f"the ranks on {host}", [r for r in everyone if hosts[r] == host]))
    if len(nodes) > 1:
        for index in sorted(set(local_ranks)):
            groups.append((f"local rank {index} across nodes", [r for r in everyone if local_ranks[r] == index]))
    return groups


def run(session) -> Verdict:
    import torch
    import torch.distributed as dist

    session.doing("exchanging local ranks for the subgroups")
    local_ranks = session.gather(session.local_rank)
    groups = plan(session.hosts, local_ranks)
    slowest, wrong = 0.0, []
    for name, ranks in groups:
        session.doing(f"creating {name}")
        group = dist.new_group(ranks)
        if session.rank not in ranks:
            continue
        session.doing(f"the first all-reduce on {name}")
        started = time.perf_counter()
        tensor = torch.ones(1024, device=session.device)
        session.wait(dist.all_reduce(tensor, group=group, async_op=True))
        slowest = max(slowest, time.perf_counter() - started)
        if int((tensor != len(ranks)).sum().item()):
            wrong.append(name)
    session.doing("comparing the subgroups' results")
    wrong = sorted({name for names in session.gather(wrong) for name in names})
    slowest = session.agree(slowest, "max")
    if wrong:
        return Verdict.failed("wrong sums on " + ", ".join(wrong), groups=len(groups))
    return Verdict.passed(
        f"{len(groups)} groups ({NEW_GROUPS} new groups of all ranks, "
        f"{session.nodes} per node, {len(set(local_ranks)) if session.nodes > 1 else 0} across nodes): each first "
        f"all-reduce gave the right sum, the slowest in {slowest:.2f} s",
        groups=len(groups),
        slowest_s=slowest,
    )
