"""Emptiness: candidates with no workload pods, settled for their pool's `consolidateAfter`, are deleted
together in one command, as many as each pool's budget for `Empty` allows. No re-solve is needed.

An empty reserved node stays while a node of its instance type and zone runs work outside the
reservation in a pool that consolidates under-used nodes: deleting it would save nothing (the reservation is paid whether used or not), and
consolidation can then move that work onto it, saving the other node's price.

Owns which empty nodes go now; when a node became empty is read by `candidates`, budgets are `budgets`'.
"""

from __future__ import annotations

from provisioner.api import labels as wk
from provisioner.api.nodepool import ConsolidationPolicy, DisruptionReason
from provisioner.disruption import candidates as cand
from provisioner.disruption.context import Context
from provisioner.disruption.model import BlockerKind, Command
from provisioner.state.cluster import StateNode

METHOD = "emptiness"


def run(ctx: Context) -> None:
    """Delete every settled empty candidate the budgets allow, in one command."""
    chosen: list[StateNode] = []
    outside: dict[tuple[str, str], str] | None = None
    for node in ctx.candidates:
        if not ctx.free(node) or ctx.facts(node).workload:
            continue
        if cand.capacity_type(node) == wk.CAPACITY_TYPE_RESERVED:
            if outside is None:
                outside = _outside_reservations(ctx)
            other = outside.get((cand.instance_type(node), cand.zone(node)))
            if other is not None:
                ctx.block(
                    node,
                    BlockerKind.RESERVED_FOR_WORK,
                    f"kept for the work of {other} ({cand.instance_type(node)} outside the reservation): "
                    "deleting a reserved node saves nothing, the reservation is paid",
                    method=METHOD,
                )
                continue
        pool = ctx.pool(node)
        if not cand.settled(ctx.facts(node).empty_since, pool, ctx.clock):
            ctx.block(
                node,
                BlockerKind.NOT_SETTLED,
                f"empty for less than consolidateAfter {pool.spec.disruption.consolidate_after}",
                method=METHOD,
            )
            continue
        why = ctx.budgets.blocker(pool.name, DisruptionReason.EMPTY)
        if why is not None:
            ctx.block(node, BlockerKind.BUDGET, why, method=METHOD)
            continue
        ctx.budgets.take(pool.name)
        chosen.append(node)
    if not chosen:
        return
    # Room was taken node by node above; give it back so `accept` takes it once.
    for node in chosen:
        ctx.budgets.used[node.nodepool or ""] -= 1
    command = Command(
        reason=DisruptionReason.EMPTY,
        method=METHOD,
        nodes=tuple(chosen),
        records=ctx.records(chosen, None, reason=DisruptionReason.EMPTY, detail="no workload pods"),
    )
    ctx.accept(command, None)


def _outside_reservations(ctx: Context) -> dict[tuple[str, str], str]:
    """(instance type, zone) -> a candidate of that type and zone running work outside any reservation, in
    a pool that consolidates under-used nodes (a `WhenEmpty` pool's work would never move)."""
    out: dict[tuple[str, str], str] = {}
    for node in ctx.candidates:
        if (
            cand.capacity_type(node) != wk.CAPACITY_TYPE_RESERVED
            and ctx.facts(node).workload
            and ctx.pool(node).spec.disruption.consolidation_policy
            == ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
        ):
            out.setdefault((cand.instance_type(node), cand.zone(node)), node.name)
    return out
