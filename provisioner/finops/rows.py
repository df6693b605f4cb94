"""The values the ledger stores and the reports read: one action per node removed or replaced, one
blocker per node kept per evaluation, one usage sample per node per interval.

Pure: built from the planner's records and a snapshot; `now` comes in. The ledger maps them to tables;
the reports take them as plain values, so reports are testable without a database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from provisioner.api import labels as wk
from provisioner.api import quantities

HOURS_PER_MONTH = 730
"""The FinOps month (8,760 h / 12), for estimated monthly savings."""


@dataclass(frozen=True, slots=True)
class ActionRow:
    """One node removed or replaced."""

    time: datetime
    command_id: str
    action: str
    """`delete` or `replace`."""
    nodepool: str
    teams: tuple[str, ...]
    node: str
    instance_type: str
    capacity_type: str
    zone: str
    reason: str
    method: str
    price_per_hour: float
    replacement_type: str | None
    replacement_capacity_type: str | None
    replacement_price_per_hour: float
    savings_per_hour: float
    pods_moved: int
    pods: tuple[str, ...] = ()
    detail: str = ""
    replacement_nodes: tuple[str, ...] = ()
    """Names of the replacement nodes once launched (the controller fills them; churn reads them)."""

    @property
    def estimated_monthly_savings(self) -> float:
        return self.savings_per_hour * HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class BlockerRow:
    """One node kept in one evaluation, and why."""

    time: datetime
    evaluation_id: str
    node: str
    nodepool: str
    kind: str
    method: str
    detail: str


@dataclass(frozen=True, slots=True)
class UsageRow:
    """A node's capacity and allocation over `hours` starting at `time` (GPUs apart from CPU/memory)."""

    time: datetime
    hours: float
    node: str
    nodepool: str
    instance_type: str
    capacity_type: str
    price_per_hour: float
    cpu_capacity: int
    """Millicores."""
    cpu_allocated: int
    memory_capacity: int
    """Bytes."""
    memory_allocated: int
    gpu_capacity: int = 0
    gpu_allocated: int = 0
    teams: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cost(self) -> float:
        return self.price_per_hour * self.hours

    @property
    def used_fraction(self) -> float:
        """GPU nodes are paid for their GPUs; other nodes for the busier of CPU and memory."""
        if self.gpu_capacity > 0:
            return min(1.0, self.gpu_allocated / self.gpu_capacity)
        fractions = [
            used / cap
            for used, cap in (
                (self.cpu_allocated, self.cpu_capacity),
                (self.memory_allocated, self.memory_capacity),
            )
            if cap > 0
        ]
        return min(1.0, max(fractions, default=0.0))

    @property
    def idle_cost(self) -> float:
        return self.cost * (1.0 - self.used_fraction)

    @property
    def gpu_idle_hours(self) -> float:
        return max(0, self.gpu_capacity - self.gpu_allocated) * self.hours


def action_rows(
    records: Iterable,
    *,
    time: datetime,
    command_id: str,
    method: str,
) -> list[ActionRow]:
    """Ledger rows from the planner's `NodeRecord`s of one command."""
    out = []
    for r in records:
        out.append(
            ActionRow(
                time=time,
                command_id=command_id,
                action=r.action,
                nodepool=r.nodepool,
                teams=tuple(r.teams),
                node=r.node,
                instance_type=r.instance_type,
                capacity_type=r.capacity_type,
                zone=r.zone,
                reason=str(r.reason.value if hasattr(r.reason, "value") else r.reason),
                method=method,
                price_per_hour=r.price_per_hour,
                replacement_type=r.replacement_type,
                replacement_capacity_type=r.replacement_capacity_type,
                replacement_price_per_hour=r.replacement_price_per_hour,
                savings_per_hour=r.savings_per_hour,
                pods_moved=len(r.pods),
                pods=tuple(m.pod for m in r.pods),
                detail=r.detail,
            )
        )
    return out


def plan_rows(plan, *, evaluation_id: str) -> tuple[list[ActionRow], list[BlockerRow]]:
    """Every action and blocker row of a planner `Plan` (time = the plan's `now`)."""
    actions: list[ActionRow] = []
    for index, command in enumerate(plan.commands):
        actions += action_rows(
            command.records, time=plan.now, command_id=f"{evaluation_id}-{index}", method=command.method
        )
    blockers = [
        BlockerRow(
            time=plan.now,
            evaluation_id=evaluation_id,
            node=b.node,
            nodepool=b.nodepool,
            kind=str(b.kind.value if hasattr(b.kind, "value") else b.kind),
            method=b.method,
            detail=b.detail,
        )
        for b in plan.blockers
    ]
    return actions, blockers


def usage_rows(snapshot, *, time: datetime, hours: float) -> list[UsageRow]:
    """One usage sample per node we own in the snapshot, over the `hours` that start at `time`."""
    from provisioner.state.cluster import team_of

    out = []
    for node in snapshot.nodes:
        if node.claim is None or node.node is None:
            continue
        alloc = node.allocatable
        used = node.requested
        teams = sorted({t for p in node.pods if (t := team_of(p, snapshot.namespaces))})
        out.append(
            UsageRow(
                time=time,
                hours=hours,
                node=node.name,
                nodepool=node.nodepool or "",
                instance_type=node.claim.status.instance_type or node.labels.get(wk.INSTANCE_TYPE, ""),
                capacity_type=node.claim.status.capacity_type or node.labels.get(wk.CAPACITY_TYPE, ""),
                price_per_hour=node.price,
                cpu_capacity=alloc.get(quantities.CPU, 0),
                cpu_allocated=used.get(quantities.CPU, 0),
                memory_capacity=alloc.get(quantities.MEMORY, 0),
                memory_allocated=used.get(quantities.MEMORY, 0),
                gpu_capacity=alloc.get(wk.GPU_RESOURCE, 0),
                gpu_allocated=used.get(wk.GPU_RESOURCE, 0),
                teams=tuple(teams),
            )
        )
    return out
