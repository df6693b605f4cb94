"""Consolidation, the part multi-node and single-node share: which candidates may be consolidated (the
pool's policy, `consolidateAfter`), in what order (idle GPUs first, then the cheapest to disrupt), and
whether a re-solve is worth acting on (every pod fits, none onto capacity still in flight, at most one
replacement, cheaper, never a reserved node traded for capacity outside a reservation, enough spot options
for spot-to-spot, the pool's minimum savings per pod) and the command it makes.

How many nodes to try at once is left to `multinode` and `singlenode`; the re-solve and accepting the
command to the context.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from provisioner.api import labels as wk
from provisioner.api.nodepool import ConsolidationPolicy, DisruptionReason
from provisioner.disruption import candidates as cand
from provisioner.disruption.context import Context
from provisioner.disruption.model import BlockerKind, Command
from provisioner.disruption.records import CENT, pin
from provisioner.scheduling.results import Results
from provisioner.state.cluster import StateNode


def consolidatable(ctx: Context, node: StateNode, *, method: str) -> bool:
    """The node's pool consolidates under-used nodes and its pods have settled; else the blocker."""
    pool = ctx.pool(node)
    if pool.spec.disruption.consolidation_policy != ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED:
        ctx.block(
            node,
            BlockerKind.POLICY,
            f"pool {pool.name} consolidates only empty nodes (WhenEmpty)",
            method=method,
        )
        return False
    if not cand.settled(ctx.facts(node).last_pod_event, pool, ctx.clock):
        ctx.block(
            node,
            BlockerKind.NOT_SETTLED,
            f"a pod arrived or left less than consolidateAfter {pool.spec.disruption.consolidate_after} ago",
            method=method,
        )
        return False
    return True


def candidates(ctx: Context, *, method: str) -> list[StateNode]:
    """The free candidates with pods that may be consolidated, in the order to try them (`NodeFacts.order`:
    GPU nodes held only by CPU pods first, then the cheapest to disrupt)."""
    out = [
        n
        for n in ctx.candidates
        if ctx.free(n) and ctx.facts(n).workload and consolidatable(ctx, n, method=method)
    ]
    out.sort(key=lambda n: ctx.facts(n).order)
    return out


def _min_savings(ctx: Context, nodes: Sequence[StateNode]) -> Decimal:
    return max((ctx.pool(n).min_savings_per_pod_hour for n in nodes), default=Decimal(0))


def judge(ctx: Context, nodes: Sequence[StateNode], results: Results) -> tuple[BlockerKind, str] | None:
    """Whether a consolidation re-solve is worth acting on; the blocker when it is not."""
    if results.unschedulable:
        first = results.unschedulable[0]
        why = "; ".join(f"{r.nodepool}: {r.reason}" for r in first.reasons) or "no pool can take it"
        return BlockerKind.PODS_DO_NOT_FIT, f"pod {first.pod.key} fits nowhere else ({why})"
    arriving = ctx.destination_blocker(results.placements)
    if arriving is not None:
        return arriving
    before = sum(n.price for n in nodes)
    if len(results.new_claims) > 1:
        return BlockerKind.NOT_CHEAPER, f"its pods would need {len(results.new_claims)} new nodes"
    reserved = [n.name for n in nodes if cand.capacity_type(n) == wk.CAPACITY_TYPE_RESERVED]
    leaving = [c for c in results.new_claims if c.offering.capacity_type != wk.CAPACITY_TYPE_RESERVED]
    if reserved and leaving:
        # A reservation is paid whether used or not: a "cheaper" node outside it is paid on top of it.
        claim = leaving[0]
        return (
            BlockerKind.NOT_CHEAPER,
            f"reserved node {reserved[0]} stays: its reservation is paid whether used or not, so "
            f"{claim.instance_type.name} {claim.offering.capacity_type} at ${claim.offering.price:.4f}/h "
            "would cost more, not less",
        )
    after = results.cost_per_hour
    if after >= before - CENT:
        claim = results.new_claims[0]
        return (
            BlockerKind.NOT_CHEAPER,
            f"the cheapest replacement {claim.instance_type.name} costs ${after:.4f}/h, "
            f"not less than ${before:.4f}/h",
        )
    if results.new_claims:
        claim = results.new_claims[0]
        all_spot = all(cand.capacity_type(n) == wk.CAPACITY_TYPE_SPOT for n in nodes)
        if all_spot and claim.offering.capacity_type == wk.CAPACITY_TYPE_SPOT:
            cheaper = sum(
                1
                for it in claim.instance_types
                if (o := it.cheapest(capacity_types={wk.CAPACITY_TYPE_SPOT})) is not None and o.price < before
            )
            least_options = ctx.settings.spot_to_spot_min_options
            if cheaper < least_options:
                return (
                    BlockerKind.SPOT_TO_SPOT,
                    f"spot-to-spot replacement needs {least_options} cheaper "
                    f"spot options, only {cheaper} offered",
                )
    pods = sum(len(ctx.facts(n).workload) for n in nodes)
    least = _min_savings(ctx, nodes)
    saving = before - after
    if pods and least > 0 and Decimal(repr(saving / pods)) < least:
        return (
            BlockerKind.MIN_SAVINGS,
            f"saves ${saving / pods:.4f}/h per evicted pod, under the pool's minimum ${least}/h",
        )
    return None


def command(ctx: Context, nodes: Sequence[StateNode], results: Results, *, method: str) -> Command:
    """The consolidation command: delete the nodes, launch the (pinned, cheaper) replacement if any."""
    detail = ""
    if any(ctx.facts(n).gpu_idle for n in nodes):
        detail = "GPU node held only by CPU pods; they move to CPU capacity"
    return Command(
        reason=DisruptionReason.UNDERUTILIZED,
        method=method,
        nodes=tuple(nodes),
        replacements=tuple(
            pin(c, capacity_type=c.offering.capacity_type, below=sum(n.price for n in nodes))
            for c in results.new_claims
        ),
        records=ctx.records(nodes, results, reason=DisruptionReason.UNDERUTILIZED, detail=detail),
    )
