"""Expiration and drift: the forceful methods. A node past its claim's `expireAfter` goes whatever the
price, budgets, do-not-disrupt or PDBs (Karpenter's forceful expiration). A node drifted from its pool's
template, its NodeClass or the requirements its labels must meet, or in a Capacity Block that ends within
`CAPACITY_BLOCK_LEAD`, is replaced whatever the price, as long as budgets and PDBs allow it and its pods
can reschedule (a block's replacements never go back into a block that ends soon).

A node running a member of a gang (`gangs`) is never disrupted alone: when one of a gang's nodes expires or
drifts, all of its nodes go in one command (Karpenter's multi-node semantics applied to the gang as a
unit), gated by budgets counting every node, or none of them does.

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
from provisioner.disruption import gangs
from provisioner.disruption.context import Context
from provisioner.disruption.model import BlockerKind, Command
from provisioner.disruption.plan_time import PlanTime
from provisioner.scheduling.results import Results
from provisioner.state.cluster import StateNode
from provisioner.state.objects import SelectorRequirement

CAPACITY_BLOCK_ENDING = "capacity-block-ending"
"""The method name of a replacement forced by a block's end (ledger rows, Events)."""
CAPACITY_BLOCK_LEAD = timedelta(hours=1)
"""How long before a Capacity Block ends its nodes are replaced. EC2 starts terminating a block's
instances 30 minutes before its end; an hour leaves the replacements time to launch and the pods time
to drain gracefully."""


def _unit(
    ctx: Context, node: StateNode, units: Mapping[str, tuple[str, frozenset[str]]]
) -> tuple[list[StateNode], str]:
    """The nodes disrupted together with `node`: all its gang's nodes (with a detail naming the gang), or
    the node alone."""
    found = units.get(node.name)
    if found is None:
        return [node], ""
    gang, names = found
    nodes = [n for n in ctx.owned if n.name in names]
    return nodes, f"gang {gang} runs on {len(names)} nodes, disrupted together"


def _units(ctx: Context) -> dict[str, tuple[str, frozenset[str]]]:
    """Node -> its gang and all the gang's nodes, for the nodes of gangs on more than one node."""
    return {n: (g, nodes) for g, nodes in gangs.gang_nodes(ctx.snapshot).items() for n in nodes}


def _replace_forcefully(
    ctx: Context, nodes: Sequence[StateNode], reason: DisruptionReason, *, method: str, detail: str
) -> None:
    """Drifted nodes go whatever the price, together (a gang's nodes); their pods must still have
    somewhere to go."""
    if not ctx.gate(nodes, reason, method=method):
        return
    busy = [n for n in nodes if ctx.facts(n).workload]
    results = ctx.simulate(busy) if busy else Results()
    if results.unschedulable:
        first = results.unschedulable[0]
        why = "; ".join(f"{r.nodepool}: {r.reason}" for r in first.reasons) or "no pool can take it"
        for node in nodes:
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
        nodes=tuple(nodes),
        replacements=tuple(results.new_claims),
        records=ctx.records(nodes, results, reason=reason, detail=detail),
    )
    ctx.accept(command, results)


def expiration(ctx: Context) -> None:
    """Expiration is forceful, as Karpenter's: every expired node goes, whatever the budgets,
    do-not-disrupt or PDBs say (they hold its drain only until the claim's terminationGracePeriod) and
    whether or not all its pods fit elsewhere now. It still counts against the budgets. An expired node
    of a gang takes all the gang's nodes with it, in one command: the job cannot run without it."""
    units = _units(ctx)
    due: list[tuple[list[StateNode], str]] = []
    taken: set[str] = set()
    for node in ctx.owned:
        expires = ctx.facts(node).expires
        if node.name in taken or expires is None or not ctx.clock.reached(expires[0] + expires[1]):
            continue
        assert node.claim is not None
        nodes, gang = _unit(ctx, node, units)
        nodes = [n for n in nodes if n.name not in taken]
        taken.update(n.name for n in nodes)
        detail = f"{node.name} created {expires[0].isoformat()}, expireAfter {node.claim.spec.expire_after}"
        due.append((nodes, "; ".join(x for x in (detail, gang) if x)))
    # All of them go: none may receive the pods of another.
    ctx.remove(taken)
    for nodes, detail in due:
        if ctx.done():
            return
        busy = [n for n in nodes if ctx.facts(n).workload]
        results = ctx.simulate(busy) if busy else Results()
        if results.unschedulable:
            detail += f"; {len(results.unschedulable)} pod(s) fit nowhere now and wait for capacity"
        command = Command(
            reason=DisruptionReason.EXPIRED,
            method="expiration",
            nodes=tuple(nodes),
            replacements=tuple(results.new_claims),
            records=ctx.records(nodes, results, reason=DisruptionReason.EXPIRED, detail=detail),
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
    very same pool requirements, pool name and hashes (the rest of what it reads is the node's own). The
    requirements' list, not the pool: a status write makes a new pool object and shares its spec, and the
    pools' status changes with nearly every pass that changes the nodes."""
    assert node.claim is not None
    facts = ctx.facts(node)
    pool = ctx.pool(node)
    ref = node.claim.spec.node_class_ref
    requirements = pool.spec.template.spec.requirements
    against = (requirements, pool.name, hashes.pools[pool.name], hashes.classes.get((ref.kind, ref.name)))
    known = facts.drift
    if known is None or known[0][0] is not requirements or known[0][1:] != against[1:]:
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
    empty ones first, then the earliest drifted (a drift the provider dated before one seen from a hash).
    A drifted node of a gang goes with all the gang's nodes, when all of them are candidates (else the
    gang waits, each held node saying why)."""
    hashes = _Hashes(ctx)
    units = _units(ctx)
    candidates = {n.name for n in ctx.candidates}
    due: list[tuple[StateNode, str]] = []
    for node in ctx.candidates:
        if ctx.free(node) and (why := _drift(ctx, node, hashes)) is not None:
            due.append((node, why))
    far = datetime.max.replace(tzinfo=UTC)
    due.sort(key=lambda d: (bool(ctx.facts(d[0]).workload), _drifted_since(d[0]) or far))
    for node, why in due:
        if ctx.done():
            return
        if not ctx.free(node):
            continue
        nodes, gang = _unit(ctx, node, units)
        kept = [n.name for n in nodes if n.name not in candidates or not ctx.free(n)]
        if kept:
            for n in nodes:
                ctx.block(n, BlockerKind.GANG, f"{gang}; {', '.join(kept)} cannot go now", method="drift")
            continue
        detail = "; ".join(x for x in (f"{node.name}: {why}" if gang else why, gang) if x)
        _replace_forcefully(ctx, nodes, DisruptionReason.DRIFTED, method="drift", detail=detail)


def _block_ends(instance_types: Mapping[str, Sequence[InstanceType]]) -> dict[str, datetime]:
    """Reservation id -> its end, for every reservation the pools' offerings carry an end for."""
    return {
        o.reservation.id: o.reservation.ends_at
        for types in instance_types.values()
        for t in types
        for o in t.offerings
        if o.reservation is not None and o.reservation.ends_at is not None
    }


def _ending(instance_types: Mapping[str, Sequence[InstanceType]], clock: PlanTime) -> dict[str, datetime]:
    """The Capacity Blocks that end within CAPACITY_BLOCK_LEAD of now, with their ends."""
    return {
        rid: end
        for rid, end in _block_ends(instance_types).items()
        if clock.reached(end - CAPACITY_BLOCK_LEAD)
    }


def without_ending_blocks(
    instance_types: Mapping[str, Sequence[InstanceType]], *, clock: PlanTime
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
        _replace_forcefully(
            ctx, [node], DisruptionReason.EXPIRED, method=CAPACITY_BLOCK_ENDING, detail=detail
        )
