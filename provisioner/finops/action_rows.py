"""The rows of what disruption did: one `ActionRow` per node a command removes or replaces, one
`BlockerRow` per node a plan kept. Pure: built from the planner's commands and plans and the replacements
really launched; the time comes in.

An action's money is `provisioner.finops.money`'s one rule:
- its `savings_per_hour` is `money.claimed_saving` of the node removed against its share of the
  replacements *really launched* (their prices from the claims' status, not the plan's); expiration,
  drift and a Capacity Block ending claim none (`change_per_hour` shows what they moved);
- pods nothing recreates (no controller owner: bare pods) are evicted for good, so their share of the
  node's $/h is `evicted_per_hour` ("workload evicted"), never a saving.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from provisioner.api import accelerators, quantities
from provisioner.finops import money
from provisioner.finops.rows import ActionRow, BlockerRow, workload_of

if TYPE_CHECKING:
    from provisioner.disruption.model import Command, DisruptionPlan
    from provisioner.state.cluster import StateNode
    from provisioner.state.objects import Pod


def _paid_share(node: StateNode, pods: Sequence[Pod]) -> float:
    """The pods' share of what the node is paid for, measured as `UsageRow.used_fraction` measures it."""
    alloc = node.allocatable
    total: dict[str, int] = {}
    for pod in pods:
        total = quantities.add(total, pod.requests)
    gpus = accelerators.units(alloc)
    if gpus > 0:
        return min(1.0, accelerators.units(total) / gpus)
    fractions = [total.get(k, 0) / alloc[k] for k in (quantities.CPU, quantities.MEMORY) if alloc.get(k, 0)]
    return min(1.0, max(fractions, default=0.0))


@dataclass(frozen=True, slots=True)
class Launched:
    """A replacement as the cloud really launched it."""

    node: str
    instance_type: str
    capacity_type: str
    price_per_hour: float


def action_rows(
    command: Command,
    *,
    time: datetime,
    command_id: str,
    launched: Sequence[Launched] | None = None,
) -> list[ActionRow]:
    """Ledger rows of one command, one per node it removes.

    `launched` are its replacements as really launched; None means "as planned" (a plan not carried out).
    The replacements' $/h is shared among the removed nodes in proportion to their prices (evenly when they
    cost nothing: reserved nodes), so a command's rows add up to its whole change in $/h; a reserved node
    moved onto on-demand capacity (a Capacity Block ending) saves a negative amount.
    """
    by_name = {n.name: n for n in command.nodes}
    removed = sum(r.price_per_hour for r in command.records)
    if launched is not None:
        after = sum(x.price_per_hour for x in launched)
        launched_type = ",".join(sorted({x.instance_type for x in launched})) or None
        launched_capacity = ",".join(sorted({x.capacity_type for x in launched})) or None
    out = []
    for r in command.records:
        node = by_name.get(r.node)
        workload = [p for p in node.pods if not p.is_daemonset_pod and not p.is_terminal] if node else []
        bare = {p.key: p for p in workload if workload_of(p) is None}
        evicted = r.price_per_hour * _paid_share(node, list(bare.values())) if node and bare else 0.0
        if launched is None:
            replacement = r.replacement_price_per_hour
            rtype, rcapacity = r.replacement_type, r.replacement_capacity_type
        else:
            share = r.price_per_hour / removed if removed > 0 else 1 / len(command.records)
            replacement = after * share
            rtype, rcapacity = launched_type, launched_capacity
        moved = tuple(m.pod for m in r.pods if m.pod not in bare)
        out.append(
            ActionRow(
                time=time,
                command_id=command_id,
                action="replace" if rtype else "delete",
                nodepool=r.nodepool,
                teams=tuple(r.teams),
                node=r.node,
                instance_type=r.instance_type,
                capacity_type=r.capacity_type,
                zone=r.zone,
                reason=str(r.reason.value),
                method=command.method,
                price_per_hour=r.price_per_hour,
                replacement_type=rtype,
                replacement_capacity_type=rcapacity,
                replacement_price_per_hour=replacement,
                savings_per_hour=money.claimed_saving(
                    reason=str(r.reason.value),
                    method=command.method,
                    removed=r.price_per_hour,
                    launched=replacement,
                    evicted=evicted,
                ),
                pods_moved=len(moved),
                pods=moved,
                detail=r.detail,
                replacement_nodes=tuple(x.node for x in launched or ()),
                evicted_pods=tuple(sorted(bare)),
                evicted_per_hour=evicted,
                workloads=tuple(sorted({w for p in workload if (w := workload_of(p))})),
            )
        )
    return out


def blocker_rows(plan: DisruptionPlan, *, evaluation_id: str) -> list[BlockerRow]:
    """Every blocker of a planner `DisruptionPlan` (time = the plan's `now`)."""
    return [
        BlockerRow(
            time=plan.now,
            evaluation_id=evaluation_id,
            node=b.node,
            nodepool=b.nodepool,
            kind=str(b.kind.value),
            method=b.method,
            detail=b.detail,
        )
        for b in plan.blockers
    ]
