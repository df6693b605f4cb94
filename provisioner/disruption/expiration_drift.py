"""Expiration and drift: the forceful methods. A node past its claim's `expireAfter` goes whatever the
price, budgets, do-not-disrupt or PDBs (Karpenter's forceful expiration). A node drifted from its pool's
template, its NodeClass or the requirements its labels must meet, or in a Capacity Block that ends within
`CAPACITY_BLOCK_LEAD`, is replaced whatever the price, as long as budgets and PDBs allow it and its pods
can reschedule (a block's replacements never go back into a block that ends soon).

Owns when a node has expired or drifted (and the detail saying so); the budget and PDB gate, the re-solve
and accepting the command are the context's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from provisioner.api import labels as wk
from provisioner.api.common import condition, is_true
from provisioner.api.hashing import nodeclass_hash, nodepool_hash
from provisioner.api.nodeclaim import DRIFTED
from provisioner.api.nodepool import DisruptionReason
from provisioner.cloudprovider.types import InstanceType
from provisioner.disruption.clock import Clock
from provisioner.disruption.context import Context
from provisioner.disruption.model import BlockerKind, Command
from provisioner.scheduling.results import Results
from provisioner.state.cluster import StateNode
from provisioner.state.objects import SelectorRequirement

CAPACITY_BLOCK_ENDING = "capacity-block-ending"
"""The method name of a replacement forced by a block's end (ledger rows, Events)."""
CAPACITY_BLOCK_LEAD = timedelta(hours=1)
"""How long before a Capacity Block ends its nodes are replaced. EC2 starts terminating a block's
instances 30 minutes before its end; an hour leaves the replacements time to launch and the pods time
to drain gracefully."""


def _replace_forcefully(
    ctx: Context, node: StateNode, reason: DisruptionReason, *, method: str, detail: str
) -> None:
    """Drifted nodes go whatever the price; their pods must still have somewhere to go."""
    if not ctx.gate([node], reason, method=method):
        return
    results = ctx.simulate([node]) if ctx.facts(node).workload else Results()
    if results.unschedulable:
        first = results.unschedulable[0]
        why = "; ".join(f"{r.nodepool}: {r.reason}" for r in first.reasons) or "no pool can take it"
        ctx.block(
            node,
            BlockerKind.PODS_DO_NOT_FIT,
            f"pod {first.pod.key} would not reschedule ({why})",
            method=method,
        )
        return
    command = Command(
        reason=reason,
        method=method,
        nodes=(node,),
        replacements=tuple(results.new_claims),
        records=ctx.records([node], results, reason=reason, detail=detail),
    )
    ctx.accept(command, results)


def expiration(ctx: Context) -> None:
    """Expiration is forceful, as Karpenter's: every expired node goes, whatever the budgets,
    do-not-disrupt or PDBs say (they hold its drain only until the claim's terminationGracePeriod) and
    whether or not all its pods fit elsewhere now. It still counts against the budgets."""
    due: list[tuple[StateNode, datetime]] = []
    for node in ctx.owned:
        expires = ctx.facts(node).expires
        if expires is not None and ctx.clock.reached(expires[0] + expires[1]):
            due.append((node, expires[0]))
    # All of them go: none may receive the pods of another.
    ctx.remove(node.name for node, _ in due)
    for node, born in due:
        if ctx.done():
            return
        assert node.claim is not None
        detail = f"created {born.isoformat()}, expireAfter {node.claim.spec.expire_after}"
        results = ctx.simulate([node]) if ctx.facts(node).workload else Results()
        if results.unschedulable:
            detail += f"; {len(results.unschedulable)} pod(s) fit nowhere now and wait for capacity"
        command = Command(
            reason=DisruptionReason.EXPIRED,
            method="expiration",
            nodes=(node,),
            replacements=tuple(results.new_claims),
            records=ctx.records([node], results, reason=DisruptionReason.EXPIRED, detail=detail),
        )
        ctx.accept(command, results)


class _Hashes:
    """The current hash of every pool template and NodeClass, to compare with the claims' stamps."""

    def __init__(self, ctx: Context) -> None:
        self.pools = {name: nodepool_hash(p) for name, p in ctx.pools.items()}
        self.classes = {key: nodeclass_hash(nc) for key, nc in ctx.snapshot.nodeclasses.items()}


def drift_reason(ctx: Context, node: StateNode, hashes: _Hashes) -> str | None:
    """Why the node no longer matches what its pool would launch now, or None."""
    assert node.claim is not None
    pool = ctx.pool(node)
    annotations = node.claim.metadata.annotations
    stamped = annotations.get(wk.NODEPOOL_HASH)
    if stamped and stamped != hashes.pools[pool.name]:
        return f"pool template changed (hash {stamped} -> {hashes.pools[pool.name]})"
    ref = node.claim.spec.node_class_ref
    stamped = annotations.get(wk.NODECLASS_HASH)
    current = hashes.classes.get((ref.kind, ref.name))
    if stamped and current and stamped != current:
        return f"{ref.kind} {ref.name} changed (hash {stamped} -> {current})"
    if is_true(node.claim.status.conditions, DRIFTED):
        return "the cloud provider reports the node drifted"
    labels = node.labels
    for req in pool.spec.template.spec.requirements:
        if req.key not in labels:
            continue
        selector = SelectorRequirement(key=req.key, operator=req.operator.value, values=tuple(req.values))
        if not selector.matches(labels):
            return f"label {req.key}={labels[req.key]} no longer meets the pool's requirement"
    return None


def _drift(ctx: Context, node: StateNode, hashes: _Hashes) -> str | None:
    """`drift_reason`, taken from the node's facts when an earlier plan judged this very node against the
    very same pool with the same hashes (the rest of what it reads is the node's own)."""
    assert node.claim is not None
    facts = ctx.facts(node)
    pool = ctx.pool(node)
    ref = node.claim.spec.node_class_ref
    against = (pool, hashes.pools[pool.name], hashes.classes.get((ref.kind, ref.name)))
    known = facts.drift
    if known is None or known[0][0] is not pool or known[0][1:] != against[1:]:
        known = facts.drift = (against, drift_reason(ctx, node, hashes))
    return known[1]


def _drifted_since(node: StateNode) -> datetime | None:
    """When the provider's Drifted condition turned true, when it says so."""
    assert node.claim is not None
    found = condition(node.claim.status.conditions, DRIFTED)
    if found is None or not is_true([found], DRIFTED) or found.last_transition_time is None:
        return None
    at = found.last_transition_time
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def drift(ctx: Context) -> None:
    """Replace every candidate that drifted, as Karpenter orders them when budgets allow only some: the
    empty ones first, then the earliest drifted (a drift the provider dated before one seen from a hash)."""
    hashes = _Hashes(ctx)
    due: list[tuple[StateNode, str]] = []
    for node in ctx.candidates:
        if ctx.free(node) and (why := _drift(ctx, node, hashes)) is not None:
            due.append((node, why))
    far = datetime.max.replace(tzinfo=UTC)
    due.sort(key=lambda d: (bool(ctx.facts(d[0]).workload), _drifted_since(d[0]) or far))
    for node, why in due:
        if ctx.done():
            return
        if ctx.free(node):
            _replace_forcefully(ctx, node, DisruptionReason.DRIFTED, method="drift", detail=why)


def _block_ends(instance_types: Mapping[str, Sequence[InstanceType]]) -> dict[str, datetime]:
    """Reservation id -> its end, for every reservation the pools' offerings carry an end for."""
    return {
        o.reservation.id: o.reservation.ends_at
        for types in instance_types.values()
        for t in types
        for o in t.offerings
        if o.reservation is not None and o.reservation.ends_at is not None
    }


def _ending(instance_types: Mapping[str, Sequence[InstanceType]], clock: Clock) -> dict[str, datetime]:
    """The Capacity Blocks that end within CAPACITY_BLOCK_LEAD of now, with their ends."""
    return {
        rid: end
        for rid, end in _block_ends(instance_types).items()
        if clock.reached(end - CAPACITY_BLOCK_LEAD)
    }


def without_ending_blocks(
    instance_types: Mapping[str, Sequence[InstanceType]], *, clock: Clock
) -> Mapping[str, Sequence[InstanceType]]:
    """The types with the offerings of Capacity Blocks ending soon flagged unavailable (kept, so their
    ends stay readable); the mapping as given when none ends soon."""
    ending = set(_ending(instance_types, clock))
    if not ending:
        return instance_types
    return {
        pool: [
            t.with_offerings(
                tuple(
                    replace(o, available=False) if o.reservation and o.reservation.id in ending else o
                    for o in t.offerings
                )
            )
            for t in types
        ]
        for pool, types in instance_types.items()
    }


def reservation_ending(ctx: Context) -> None:
    """Replace every candidate in a Capacity Block that ends within CAPACITY_BLOCK_LEAD, its pods
    re-provisioned ahead of the end on capacity that outlives it."""
    ends = _ending(ctx.instance_types, ctx.clock)
    for node in ctx.candidates:
        if ctx.done() or not ctx.free(node):
            continue
        rid = node.labels.get(wk.CAPACITY_RESERVATION_ID)
        if rid not in ends:
            continue
        detail = f"capacity block {rid} ends at {ends[rid].isoformat()}; moving its pods off ahead of the end"
        _replace_forcefully(ctx, node, DisruptionReason.EXPIRED, method=CAPACITY_BLOCK_ENDING, detail=detail)
