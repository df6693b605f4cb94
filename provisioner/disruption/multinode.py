"""Multi-node consolidation: the longest run of consolidation candidates (in their order, within
budgets and PDBs) whose pods re-solve onto the rest of the cluster plus at most one cheaper node, found
by binary search over the prefix length as in Karpenter. At most one command per plan, and never one that
trades its nodes for a node of a type among them at no lower price (deleting some of them does that).
When no run of candidates is worth it, each gang's nodes (`gangs`) are tried as one unit, all of them or
none, within budgets counting every node: a gang is never consolidated in part, but may be as a whole.

Owns the choice of nodes to try together; whether a re-solve is worth acting on is `consolidation`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from provisioner.api.nodepool import DisruptionReason
from provisioner.disruption import candidates as cand
from provisioner.disruption import consolidation, gangs
from provisioner.disruption.context import Context
from provisioner.disruption.model import BlockerKind, Command
from provisioner.disruption.records import CENT
from provisioner.scheduling.results import Results
from provisioner.state.cluster import StateNode

METHOD = "multi-node"


def _chosen(ctx: Context) -> list[StateNode]:
    """Candidates each pool's budget and its PDBs allow, up to `PlannerSettings.multi_node_max_candidates`."""
    pool_room: dict[str, int | None] = {}
    chosen: list[StateNode] = []
    for node in consolidation.candidates(ctx, method=METHOD):
        pool = ctx.facts(node).nodepool or ""
        if pool not in pool_room:
            pool_room[pool] = ctx.budgets.room(pool, DisruptionReason.UNDERUTILIZED)
        room = pool_room[pool]
        if room is not None and room <= 0:
            continue
        if ctx.pdbs.blocker(ctx.facts(node).workload) is not None:
            continue
        if room is not None:
            pool_room[pool] = room - 1
        chosen.append(node)
        if len(chosen) >= ctx.settings.multi_node_max_candidates:
            break
    return chosen


def _not_same_type(
    ctx: Context, nodes: Sequence[StateNode], found: tuple[Command, Results]
) -> tuple[Command, Results] | None:
    """Never N nodes for one of a type among them that is not cheaper than the cheapest of that type
    (Karpenter's filterOutSameInstanceType): deleting the others does the same with fewer pods moved.
    The replacement keeps only cheaper options; with none left there is no command."""
    _, results = found
    if not results.new_claims:
        return found
    claim = results.new_claims[0]
    offered = {it.name for it in claim.instance_types}
    same = [n.price for n in nodes if cand.instance_type(n) in offered]
    if not same:
        return found
    ceiling = min(same)
    capacity_type = claim.offering.capacity_type
    keep = []
    for it in claim.instance_types:
        offering = it.cheapest(capacity_types={capacity_type})
        if offering is not None and offering.price < ceiling - CENT:
            keep.append((it, offering))
    if not keep:
        return None
    narrowed = dataclasses.replace(claim, instance_types=[it for it, _ in keep], offering=keep[0][1])
    results = dataclasses.replace(results, new_claims=[narrowed])
    if consolidation.judge(ctx, nodes, results) is not None:
        return None
    return consolidation.command(ctx, nodes, results, method=METHOD), results


def _attempt(ctx: Context, nodes: Sequence[StateNode]) -> tuple[Command, Results] | None:
    """The command for these nodes together, when worth it; an earlier plan's "no" for exactly these
    nodes among exactly the same others is taken as it is (the search then goes the same way)."""
    shown = ctx.shown(nodes)
    key, kept = ctx.recall(nodes, shown)
    if kept is not None:
        return None
    results = ctx.solve(nodes, shown)
    why = consolidation.judge(ctx, nodes, results)
    found = None if why is not None else (consolidation.command(ctx, nodes, results, method=METHOD), results)
    if found is not None:
        found = _not_same_type(ctx, nodes, found)
    if found is None:
        ctx.remember(nodes, key, why or (BlockerKind.NOT_CHEAPER, "no replacement option is cheaper"))
    return found


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
        if ctx.pdbs.blocker(p for n in prefix for p in ctx.facts(n).workload) is None:
            found = _attempt(ctx, prefix)
        if found is not None:
            best = found
            lo = mid + 1
        else:
            hi = mid - 1
    if best is None:
        best = _whole_gang(ctx)
    if best is not None:
        ctx.accept(*best)


def _whole_gang(ctx: Context) -> tuple[Command, Results] | None:
    """The first gang whose nodes, all candidates, consolidate together within budgets and PDBs."""
    candidates = {n.name: n for n in ctx.candidates if ctx.free(n)}
    for _, names in sorted(gangs.gang_nodes(ctx.snapshot).items()):
        if not names <= candidates.keys():
            continue
        nodes = [candidates[n] for n in sorted(names)]
        if not ctx.gate(nodes, DisruptionReason.UNDERUTILIZED, method=METHOD):
            continue
        found = _attempt(ctx, nodes)
        if found is not None:
            return found
    return None
