"""Multi-node consolidation: the longest run of consolidation candidates (in their order, within
budgets and PDBs) whose pods re-solve onto the rest of the cluster plus at most one cheaper node, found
by binary search over the prefix length as in Karpenter. At most one command per plan.

Owns the choice of nodes to try together; whether a re-solve is worth acting on is `consolidation`'s.
"""

from __future__ import annotations

from provisioner.api.nodepool import DisruptionReason
from provisioner.disruption import candidates as cand
from provisioner.disruption import consolidation
from provisioner.disruption.context import Context
from provisioner.disruption.model import Command
from provisioner.scheduling.results import Results
from provisioner.state.cluster import StateNode

METHOD = "multi-node"


def _chosen(ctx: Context) -> list[StateNode]:
    """Candidates each pool's budget and its PDBs allow, up to `Settings.multi_node_max_candidates`."""
    pool_room: dict[str, int | None] = {}
    chosen: list[StateNode] = []
    for node in consolidation.candidates(ctx, method=METHOD):
        pool = node.nodepool or ""
        if pool not in pool_room:
            pool_room[pool] = ctx.budgets.room(pool, DisruptionReason.UNDERUTILIZED)
        room = pool_room[pool]
        if room is not None and room <= 0:
            continue
        if ctx.pdbs.blocker(cand.reschedulable(node)) is not None:
            continue
        if room is not None:
            pool_room[pool] = room - 1
        chosen.append(node)
        if len(chosen) >= ctx.settings.multi_node_max_candidates:
            break
    return chosen


def run(ctx: Context) -> None:
    """Consolidate the longest prefix of candidates that is worth it, if at least two nodes."""
    chosen = _chosen(ctx)
    if len(chosen) < 2:
        return
    # Binary search for the longest prefix that re-solves into at most one cheaper node, as Karpenter.
    lo, hi = 2, len(chosen)
    best: tuple[Command, Results] | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        prefix = chosen[:mid]
        found = None
        if ctx.pdbs.blocker(p for n in prefix for p in cand.reschedulable(n)) is None:
            found = consolidation.attempt(ctx, prefix, method=METHOD)
        if found is not None:
            best = found
            lo = mid + 1
        else:
            hi = mid - 1
    if best is not None:
        ctx.accept(*best)
