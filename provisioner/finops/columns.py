"""How the ledger's rows become column values and back: one function (or, for usage rows, one object per
batch) per table, and the conversions they share (UTC times, comma-joined names, JSON lists).

The tables are `provisioner.finops.tables`', the queries `provisioner.finops.ledger`'s; this module keeps
the mapping. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from typing import Any, TypeVar

from provisioner.finops.rows import ActionRow, ReservationRow, TeamAllocation, UsageRow

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def reservation_values(r: ReservationRow) -> dict[str, Any]:
    return {
        "time": utc(r.time),
        "hours": r.hours,
        "reservation_id": r.reservation_id,
        "kind": r.kind,
        "instance_type": r.instance_type,
        "zone": r.zone,
        "price_per_hour": r.price_per_hour,
        "instances": r.instances,
        "running": r.running,
        "used": r.used,
        "gpus_per_instance": r.gpus_per_instance,
        "gpu_allocated": r.gpu_allocated,
        "nodepools": joined(r.nodepools),
        "ends_at": utc(r.ends_at) if r.ends_at is not None else None,
        "owner": r.owner,
    }


def action_values(r: ActionRow) -> dict[str, Any]:
    return {
        "time": utc(r.time),
        "command_id": r.command_id,
        "action": r.action,
        "nodepool": r.nodepool,
        "teams": joined(r.teams),
        "node": r.node,
        "instance_type": r.instance_type,
        "capacity_type": r.capacity_type,
        "zone": r.zone,
        "reason": r.reason,
        "method": r.method,
        "price_per_hour": r.price_per_hour,
        "replacement_type": r.replacement_type,
        "replacement_capacity_type": r.replacement_capacity_type,
        "replacement_price_per_hour": r.replacement_price_per_hour,
        "savings_per_hour": r.savings_per_hour,
        "estimated_monthly_savings": r.estimated_monthly_savings,
        "pods_moved": r.pods_moved,
        "pods": json_strings(r.pods),
        "detail": r.detail,
        "replacement_nodes": joined(r.replacement_nodes),
        "evicted_pods": json_strings(r.evicted_pods),
        "evicted_per_hour": r.evicted_per_hour,
        "workloads": json_strings(r.workloads),
    }


class UsageValues:
    """UsageRow -> the columns' values. One per batch: a batch's rows repeat a few times and the same
    workload and allocation lists (one node's rows, or a fleet's nodes of one Deployment), so each
    distinct one is converted once."""

    def __init__(self) -> None:
        self.utc = memo(utc)
        self.teams = memo(joined)
        self.workloads = memo(json_strings)
        self.allocations = memo(json_allocations)

    def __call__(self, r: UsageRow) -> dict[str, Any]:
        return {
            "time": self.utc(r.time),
            "hours": r.hours,
            "node": r.node,
            "nodepool": r.nodepool,
            "teams": self.teams(r.teams),
            "instance_type": r.instance_type,
            "capacity_type": r.capacity_type,
            "price_per_hour": r.price_per_hour,
            "cpu_capacity": r.cpu_capacity,
            "cpu_allocated": r.cpu_allocated,
            "memory_capacity": r.memory_capacity,
            "memory_allocated": r.memory_allocated,
            "gpu_capacity": r.gpu_capacity,
            "gpu_allocated": r.gpu_allocated,
            "provider_id": r.provider_id,
            "zone": r.zone,
            "region": r.region,
            "pool_owner": r.pool_owner,
            "workloads": self.workloads(r.workloads),
            "allocations": self.allocations(r.allocations),
            "reservation_id": r.reservation_id,
        }


def joined(values: tuple[str, ...]) -> str:
    return ",".join(values)


def json_strings(values: tuple[str, ...]) -> str:
    return json.dumps(list(values))


def json_allocations(values: tuple[TeamAllocation, ...]) -> str:
    return json.dumps([list(a) for a in values])


def split(value: str | None) -> tuple[str, ...]:
    return tuple(t for t in (value or "").split(",") if t)


def strings(value: str | None) -> tuple[str, ...]:
    """A JSON list of strings as stored (`[]` when empty or NULL) -> a tuple."""
    return tuple(json.loads(value or "[]"))


def allocations(value: str | None) -> tuple[TeamAllocation, ...]:
    return tuple(TeamAllocation(*a) for a in json.loads(value or "[]"))


def memo(convert: Callable[[K], V]) -> Callable[[K], V]:
    """`convert` remembering its answers, for one batch of rows read or written: their values repeat
    (the times of one sample, a node's workloads), and equal values then share one object."""
    seen: dict[K, V] = {}

    def get(value: K) -> V:
        try:
            return seen[value]
        except KeyError:
            out = seen[value] = convert(value)
            return out

    return get
