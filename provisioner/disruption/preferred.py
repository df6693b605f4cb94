"""Return to the preferred tier: a node on fallback capacity is replaced once the preferred tier can take
its pods again. Three kinds: a spot or on-demand node of a pool that allows reserved moves into a
reservation with room (launched outside it because it was full: the reservation is paid for either way,
so the whole price of the node is saved); an on-demand node of a pool that allows spot moves back to
spot (the re-solve is shown the pool's spot, or reserved, offerings only, and the replacement is pinned
to that capacity type); and a node whose pods name a more preferred pool in their list moves them there.
Either way every pod must land on a strictly better tier, whatever the price.

Owns what "fallback" and "better tier" mean; budgets, PDBs and the re-solve are the context's.
"""

from __future__ import annotations

from collections.abc import Sequence

from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.api.nodepool import DisruptionReason
from provisioner.cloudprovider.types import InstanceType
from provisioner.disruption import candidates as cand
from provisioner.disruption.context import Context
from provisioner.disruption.model import Command
from provisioner.disruption.records import CENT, pin
from provisioner.scheduling.results import Results
from provisioner.state.cluster import StateNode
from provisioner.state.objects import Pod, SelectorRequirement

METHOD = "return-to-preferred"


def allows(pool: NodePool, capacity_type: str) -> bool:
    """The pool's capacity-type requirement admits the capacity type (no requirement: on-demand only, as
    Karpenter)."""
    for req in pool.spec.template.spec.requirements:
        if req.key != wk.CAPACITY_TYPE:
            continue
        selector = SelectorRequirement(key=req.key, operator=req.operator.value, values=tuple(req.values))
        return selector.matches({wk.CAPACITY_TYPE: capacity_type})
    return False


def allows_spot(pool: NodePool) -> bool:
    """The pool's capacity-type requirement admits spot."""
    return allows(pool, wk.CAPACITY_TYPE_SPOT)


def _only(ctx: Context, pools: Sequence[str], capacity_type: str) -> dict[str, Sequence[InstanceType]]:
    """The instance types with the pools' other offerings hidden, so the re-solve must find this
    capacity type."""
    out = dict(ctx.instance_types)
    for pool in pools:
        out[pool] = [
            it.with_offerings(
                tuple(o for o in it.offerings if o.capacity_type == capacity_type and o.available)
            )
            for it in ctx.instance_types.get(pool, ())
        ]
    return out


def _with_reservation_room(ctx: Context) -> list[str]:
    """The pools that allow reserved capacity and have a reservation with room now."""
    return [
        name
        for name, pool in ctx.pools.items()
        if allows(pool, wk.CAPACITY_TYPE_RESERVED)
        and any(
            o.capacity_type == wk.CAPACITY_TYPE_RESERVED and o.available
            for it in ctx.instance_types.get(name, ())
            for o in it.offerings
        )
    ]


def _lands_on_preferred(
    ctx: Context, node: StateNode, pods: Sequence[Pod], results: Results, *, spot: str | None
) -> bool:
    """Every pod of the node goes to a strictly better tier than the one it is on (`spot`: onto that
    capacity type, spot or reserved)."""
    current = node.nodepool or ""
    pool_of: dict[str, str] = {}
    spot_of: dict[str, bool] = {}
    for placement in results.placements:
        receiver = ctx.nodes.get(placement.node)
        pool_of[placement.pod.key] = (receiver.nodepool or "") if receiver else ""
        spot_of[placement.pod.key] = receiver is not None and cand.capacity_type(receiver) == spot
    for claim in results.new_claims:
        for pod in claim.pods:
            pool_of[pod.key] = claim.nodepool.name
            spot_of[pod.key] = claim.offering.capacity_type == spot
    if spot:
        return all(spot_of.get(p.key, False) for p in pods)
    for pod in pods:
        dest = pool_of.get(pod.key)
        if dest is None:
            return False
        order = pod.nodepools
        if not order or current not in order:
            continue
        if dest not in order or order.index(dest) >= order.index(current):
            return False
    return True


def run(ctx: Context) -> None:
    """Move every settled candidate on fallback capacity back to its preferred tier, when it can go."""
    if not ctx.settings.return_to_preferred:
        return
    reserving = _with_reservation_room(ctx)
    spot_allowed: dict[str, bool] = {}
    for node in ctx.candidates:
        if ctx.done():
            return
        if not ctx.free(node):
            continue
        facts = ctx.facts(node)
        pods = facts.workload
        if not pods:
            continue
        pool = ctx.pool(node)
        current = cand.capacity_type(node)
        # Any pool's reservation will do (the node may have overflowed into another pool while it was
        # full): the re-solve shows those pools' reserved offerings only, and every pod must land there.
        to_reserved = current != wk.CAPACITY_TYPE_RESERVED and bool(reserving)
        if current == wk.CAPACITY_TYPE_ON_DEMAND and pool.name not in spot_allowed:
            spot_allowed[pool.name] = allows_spot(pool)
        on_fallback_capacity = to_reserved or (
            current == wk.CAPACITY_TYPE_ON_DEMAND and spot_allowed[pool.name]
        )
        # Pods whose list names a more preferred pool than the one they run in.
        demoted = [p for p in facts.listing if pool.name in p.nodepools and p.nodepools[0] != pool.name]
        if not (on_fallback_capacity or demoted):
            continue
        if not cand.settled(facts.last_pod_event, pool, ctx.clock):
            continue
        if not ctx.gate([node], DisruptionReason.RETURN_TO_PREFERRED, method=METHOD):
            continue
        target = None
        if on_fallback_capacity and not demoted:
            target = wk.CAPACITY_TYPE_RESERVED if to_reserved else wk.CAPACITY_TYPE_SPOT
        to_spot = target == wk.CAPACITY_TYPE_SPOT
        if target == wk.CAPACITY_TYPE_RESERVED:
            types = _only(ctx, list(ctx.pools), target)
        elif target:
            types = _only(ctx, [pool.name], target)
        else:
            types = None
        results = ctx.simulate([node], instance_types=types)
        if results.unschedulable:
            continue
        if not _lands_on_preferred(ctx, node, pods, results, spot=target):
            continue
        if target and sum(c.offering.price for c in results.new_claims) >= node.price - CENT:
            # Spot is preferred for its price: a spot node dearer than the on-demand one it would
            # replace (the cheap spot types still out) is no return; wait for the cheap ones.
            continue
        if target == wk.CAPACITY_TYPE_RESERVED:
            detail = f"{current} node launched while the reservation was full returns into the reservation"
        elif to_spot:
            detail = "on-demand fallback returns to spot"
        else:
            detail = "pods return to a more preferred pool of their list"
        command = Command(
            reason=DisruptionReason.RETURN_TO_PREFERRED,
            method=METHOD,
            nodes=(node,),
            replacements=tuple(
                pin(c, capacity_type=target, below=node.price) if target else c for c in results.new_claims
            ),
            records=ctx.records([node], results, reason=DisruptionReason.RETURN_TO_PREFERRED, detail=detail),
        )
        ctx.accept(command, results)
