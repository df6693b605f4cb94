"""Builders for the FinOps ledger's rows (actions, blockers, usage, reservations) at the pure tests'
`NOW`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from provisioner.finops.rows import ActionRow, BlockerRow, ReservationRow, UsageRow
from testkit.builders.common import GIB, NOW


def action_row(
    node: str = "n1",
    *,
    command_id: str = "c1",
    time: datetime = NOW,
    pool: str = "gpu",
    savings: float = 1.5,
    price: float = 2.0,
    **overrides: Any,
) -> ActionRow:
    """A ledger row of a p4d node replaced by a cheaper spot g5 (savings = price - replacement price)."""
    values: dict[str, Any] = dict(
        time=time,
        command_id=command_id,
        action="replace",
        nodepool=pool,
        teams=("research", "vision"),
        node=node,
        instance_type="p4d.24xlarge",
        capacity_type="on-demand",
        zone="us-east-1a",
        reason="Underutilized",
        method="single-node",
        price_per_hour=price,
        replacement_type="g5.xlarge",
        replacement_capacity_type="spot",
        replacement_price_per_hour=price - savings,
        savings_per_hour=savings,
        pods_moved=2,
        pods=("ml/a", "ml/b"),
        detail="",
    )
    values.update(overrides)
    return ActionRow(**values)


def blocker_row(node: str = "z", *, time: datetime = NOW, **overrides: Any) -> BlockerRow:
    """A ledger row of a node a PDB kept in one evaluation."""
    values: dict[str, Any] = dict(
        time=time,
        evaluation_id="e",
        node=node,
        nodepool="gpu",
        kind="PDB",
        method="single-node",
        detail="PDB ml/web",
    )
    values.update(overrides)
    return BlockerRow(**values)


def usage_row(node: str = "n1", *, time: datetime = NOW, **overrides: Any) -> UsageRow:
    """An hour's usage sample of a p4d node with 2 of its 8 GPUs allocated."""
    values: dict[str, Any] = dict(
        time=time,
        hours=1.0,
        node=node,
        nodepool="gpu",
        instance_type="p4d.24xlarge",
        capacity_type="on-demand",
        price_per_hour=32.0,
        cpu_capacity=96000,
        cpu_allocated=8000,
        memory_capacity=1152 * GIB,
        memory_allocated=64 * GIB,
        gpu_capacity=8,
        gpu_allocated=2,
        teams=("research",),
    )
    values.update(overrides)
    return UsageRow(**values)


def reservation_row(
    reservation_id: str = "cr-1", *, time: datetime = NOW, **overrides: Any
) -> ReservationRow:
    """An hour's sample of a 2-instance p5 reservation ($55.04/h each) with one node running, its 8 GPUs
    all requested."""
    values: dict[str, Any] = dict(
        time=time,
        hours=1.0,
        reservation_id=reservation_id,
        kind="default",
        instance_type="p5.48xlarge",
        zone="us-east-1a",
        price_per_hour=55.04,
        instances=2,
        running=1,
        used=1.0,
        gpus_per_instance=8,
        gpu_allocated=8,
        nodepools=("h100",),
    )
    values.update(overrides)
    return ReservationRow(**values)
