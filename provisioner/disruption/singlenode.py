"""Single-node consolidation: each consolidation candidate in turn is deleted, when its pods fit on the
other nodes, or replaced by one cheaper node. A replacement that is cheaper because an on-demand
fallback goes back to spot is recorded (and budgeted) as a return to the preferred tier.

Two cheap screens avoid re-solves that cannot succeed: the first-fit screen of `view` (pods that
obviously fit elsewhere are tried for deletion), and a price floor (the cheapest instance type able to
hold all the pods at once: when even that is not cheaper, no replacement can be). Whether a re-solve is
worth acting on is `consolidation`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from provisioner.api import labels as wk
from provisioner.api import quantities
from provisioner.api.nodepool import DisruptionReason
from provisioner.cloudprovider.types import InstanceType
from provisioner.disruption import candidates as cand
from provisioner.disruption import consolidation, preferred
from provisioner.disruption.context import Context
from provisioner.disruption.model import BlockerKind
from provisioner.disruption.records import CENT, relabel
from provisioner.disruption.view import fits
from provisioner.scheduling.results import Results
from provisioner.state.cluster import StateNode
from provisioner.state.objects import Pod

METHOD = "single-node"


class _PriceFloors:
    """(price, allocatable) of every available offering, cheapest first; built on first use (most plans
    never need it) with each type's allocatable computed once."""

    def __init__(self, instance_types: Mapping[str, Sequence[InstanceType]]) -> None:
        self._instance_types = instance_types
        self._floors: list[tuple[float, dict[str, int]]] | None = None

    def _all(self) -> list[tuple[float, dict[str, int]]]:
        if self._floors is None:
            out: list[tuple[float, dict[str, int]]] = []
            seen: set[int] = set()
            for types in self._instance_types.values():
                for it in types:
                    # The same type object is often offered to several pools; price it once.
                    if id(it) in seen:
                        continue
                    seen.add(id(it))
                    prices = {o.price for o in it.offerings if o.available}
                    if prices:
                        out.append((min(prices), it.allocatable))
            out.sort(key=lambda pair: pair[0])
            self._floors = out
        return self._floors

    def of(self, pods: Sequence[Pod]) -> float | None:
        """The cheapest available offering of any type able to hold all these pods at once."""
        total: dict[str, int] = {}
        for pod in pods:
            total = quantities.add(total, pod.requests)
        for price, allocatable in self._all():
            if fits(total, allocatable):
                return price
        return None


def _back_to_spot(ctx: Context, node: StateNode, results: Results) -> bool:
    """An on-demand node of a pool that allows spot, replaced by spot capacity."""
    return (
        cand.capacity_type(node) == wk.CAPACITY_TYPE_ON_DEMAND
        and preferred.allows_spot(ctx.pool(node))
        and bool(results.new_claims)
        and all(c.offering.capacity_type == wk.CAPACITY_TYPE_SPOT for c in results.new_claims)
    )


def run(ctx: Context) -> None:
    """Delete or replace each consolidation candidate in turn, when worth it."""
    floors = _PriceFloors(ctx.instance_types)
    for node in consolidation.candidates(ctx, method=METHOD):
        if ctx.done():
            return
        if not ctx.free(node):
            if node.name in ctx.destinations:
                ctx.block(node, BlockerKind.IN_PLAN, "receives pods from another command", method=METHOD)
            continue
        if not ctx.gate([node], DisruptionReason.UNDERUTILIZED, method=METHOD):
            continue
        if not ctx.view.pods_fit_elsewhere(node, removed=ctx.removed):
            floor = floors.of(ctx.facts(node).workload)
            if floor is None or floor >= node.price - CENT:
                cheapest = (
                    "no instance type" if floor is None else f"the cheapest type that fits (${floor:.4f}/h)"
                )
                ctx.block(
                    node,
                    BlockerKind.NOT_CHEAPER,
                    f"its pods fit on no other node and {cheapest} is not cheaper than ${node.price:.4f}/h",
                    method=METHOD,
                )
                continue
        shown = ctx.shown([node])
        key, kept = ctx.recall([node], shown)
        if kept is not None:
            # An earlier plan re-solved exactly this node among exactly these nodes and kept it.
            ctx.block(node, kept[0], kept[1], method=METHOD)
            continue
        results = ctx.solve([node], shown)
        why = consolidation.judge(ctx, [node], results)
        if why is not None:
            ctx.remember([node], key, why)
            ctx.block(node, why[0], why[1], method=METHOD)
            continue
        command = consolidation.command(ctx, [node], results, method=METHOD)
        if _back_to_spot(ctx, node, results):
            # Cheaper because spot is back: the FinOps record says so, and that reason's budget holds.
            if not ctx.gate([node], DisruptionReason.RETURN_TO_PREFERRED, method=METHOD):
                continue
            command = relabel(
                command, DisruptionReason.RETURN_TO_PREFERRED, "on-demand fallback returns to spot"
            )
        ctx.accept(command, results)
