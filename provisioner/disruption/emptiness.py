"""Emptiness: candidates with no workload pods, settled for their pool's `consolidateAfter`, are deleted
together in one command, as many as each pool's budget for `Empty` allows. No re-solve is needed.

Owns which empty nodes go now; when a node became empty is read by `candidates`, budgets are `budgets`'.
"""

from __future__ import annotations

from provisioner.api.nodepool import DisruptionReason
from provisioner.disruption import candidates as cand
from provisioner.disruption.context import Context
from provisioner.disruption.model import BlockerKind, Command
from provisioner.state.cluster import StateNode

METHOD = "emptiness"


def run(ctx: Context) -> None:
    """Delete every settled empty candidate the budgets allow, in one command."""
    chosen: list[StateNode] = []
    for node in ctx.candidates:
        if not ctx.free(node) or cand.reschedulable(node):
            continue
        pool = ctx.pool(node)
        if not cand.settled(cand.empty_since(node), pool, ctx.now):
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
