"""Cost by team, pool and hour (showback) from the usage samples, and the same rows as a FOCUS export.

How a node's cost is divided, per clock hour:
- the *used* part (`UsageRow.used_fraction`: GPUs on a GPU node, else the busier of CPU and memory) goes
  to the teams whose pods requested it, in proportion to each team's share measured the same way; pods in
  a namespace of no team are "(no team)";
- the *idle* part (1 - used) goes to the pool's owner team (the NodePool's `provisioner.sh/team` label),
  or to "unallocated" when the pool names no owner. DaemonSet pods belong to no team: they are the node's
  overhead, inside the idle part (a node with only DaemonSet pods is all idle);
- GPU-hours requested go to the teams, idle GPU-hours to the owner. GPUs are counted as
  `accelerators.units` counts them (NVIDIA, AMD, Neuron); on a MIG node they are its slices, so there
  GPU-hours are slice-hours, idle GPU-hours idle slices, and a slice-hour costs the node's price over its
  slices.
So every row's cost adds up to what the fleet paid: the showback total equals the scale-down report's.

FOCUS (the FinOps Foundation's FinOps Open Cost and Usage Specification, 1.0): one charge row per node,
clock hour and team share, with `Tags` naming the team, the pool and whether the share is workload or
idle, so FinOps tools allocate the cost as this report does. Prices are list prices: BilledCost,
EffectiveCost, ListCost and ContractedCost are equal (the provisioner knows no discounts).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from provisioner.finops.reports.text import csv_text, table
from provisioner.finops.rows import ReservationRow, UsageRow

NO_TEAM = "(no team)"
UNALLOCATED = "unallocated"


class Share(NamedTuple):
    """One team's part of one node in one clock hour. (A named tuple: a report makes a few per usage row,
    and a tuple is the cheapest immutable value to make.)"""

    hour: datetime
    node: str
    nodepool: str
    team: str
    kind: str
    """`workload` (requested by the team's pods) or `idle` (the pool owner's, or unallocated)."""
    hours: float
    cost: float
    gpu_hours: float
    usage: UsageRow


def clock_hours(row: UsageRow | ReservationRow) -> list[tuple[datetime, float]]:
    """(clock hour, hours of the row in it), for every clock hour the row's span touches."""
    start, end = row.time, row.time + timedelta(hours=row.hours)
    out = []
    hour = start.replace(minute=0, second=0, microsecond=0)
    while hour < end:
        overlap = (min(end, hour + timedelta(hours=1)) - max(start, hour)).total_seconds() / 3600
        if overlap > 0:
            out.append((hour, overlap))
        hour += timedelta(hours=1)
    return out


def shares(usage: Sequence[UsageRow]) -> list[Share]:
    """Every usage row divided into team shares per clock hour (see the module's rules)."""
    out = []
    for row in usage:
        used = row.used_fraction
        weights = [(a.team or NO_TEAM, row.team_fraction(a), a.gpu) for a in row.allocations]
        total_weight = sum(w for _, w, _ in weights)
        if total_weight <= 0:
            used = 0.0
        owner = row.pool_owner or UNALLOCATED
        idle_gpus = max(0, row.gpu_capacity - sum(g for _, _, g in weights))
        for hour, hours in clock_hours(row):
            cost = row.price_per_hour * hours
            for team, weight, gpus in weights:
                if weight > 0 or gpus > 0:
                    out.append(
                        Share(
                            hour=hour,
                            node=row.node,
                            nodepool=row.nodepool,
                            team=team,
                            kind="workload",
                            hours=hours,
                            cost=cost * used * weight / total_weight if total_weight else 0.0,
                            gpu_hours=gpus * hours,
                            usage=row,
                        )
                    )
            out.append(
                Share(
                    hour=hour,
                    node=row.node,
                    nodepool=row.nodepool,
                    team=owner,
                    kind="idle",
                    hours=hours,
                    cost=cost * (1.0 - used),
                    gpu_hours=idle_gpus * hours,
                    usage=row,
                )
            )
    return out


@dataclass(slots=True)
class CostLine:
    """Sums for one (team, pool) or (team, pool, hour)."""

    team: str
    nodepool: str
    hour: datetime | None
    cost: float = 0.0
    idle_cost: float = 0.0
    gpu_hours: float = 0.0
    gpu_idle_hours: float = 0.0

    @property
    def total(self) -> float:
        return self.cost + self.idle_cost


def lines(usage: Sequence[UsageRow], *, by_hour: bool = False) -> list[CostLine]:
    """Showback lines by team and pool (and clock hour with `by_hour`), biggest first (or by hour)."""
    groups: dict[tuple[str, str, datetime | None], CostLine] = {}
    for s in shares(usage):
        key = (s.team, s.nodepool, s.hour if by_hour else None)
        line = groups.setdefault(key, CostLine(team=s.team, nodepool=s.nodepool, hour=key[2]))
        if s.kind == "workload":
            line.cost += s.cost
            line.gpu_hours += s.gpu_hours
        else:
            line.idle_cost += s.cost
            line.gpu_idle_hours += s.gpu_hours
    if by_hour:
        return sorted(groups.values(), key=lambda c: (c.hour or datetime.min, c.team, c.nodepool))
    return sorted(groups.values(), key=lambda c: (-c.total, c.team, c.nodepool))


HEADERS = ("Team", "Pool", "Workload $", "Idle $", "Total $", "GPU hours", "Idle GPU hours")
KEYS = ("team", "nodepool", "cost", "idle_cost", "total", "gpu_hours", "gpu_idle_hours")


def _values(c: CostLine) -> list[Any]:
    return [
        c.team,
        c.nodepool,
        round(c.cost, 2),
        round(c.idle_cost, 2),
        round(c.total, 2),
        round(c.gpu_hours, 2),
        round(c.gpu_idle_hours, 2),
    ]


def to_table(usage: Sequence[UsageRow], *, since: datetime, now: datetime, width: int | None = None) -> str:
    found = lines(usage)
    total = sum(c.total for c in found)
    by_team: dict[str, float] = defaultdict(float)
    for c in found:
        by_team[c.team] += c.total
    head = (
        f"Cost by team and pool, {since:%Y-%m-%d %H:%M} to {now:%Y-%m-%d %H:%M} UTC: ${total:,.2f} paid\n"
        f"Idle capacity is charged to the pool's owner team (NodePool label provisioner.sh/team), "
        f"else to {UNALLOCATED!r}."
    )
    teams = table(
        ("Team", "Total $"),
        [[t, round(v, 2)] for t, v in sorted(by_team.items(), key=lambda kv: -kv[1])],
        title="By team",
        width=width,
    )
    return (
        "\n\n".join(
            [head, teams, table(HEADERS, [_values(c) for c in found], title="By team and pool", width=width)]
        )
        + "\n"
    )


def to_csv(usage: Sequence[UsageRow]) -> str:
    """One row per clock hour, team and pool."""
    return csv_text(
        ("hour", *KEYS),
        [[c.hour.isoformat() if c.hour else "", *_values(c)] for c in lines(usage, by_hour=True)],
    )


def to_json(usage: Sequence[UsageRow], *, since: datetime, now: datetime) -> str:
    found = lines(usage)
    hourly = lines(usage, by_hour=True)
    return (
        json.dumps(
            {
                "since": since.isoformat(),
                "now": now.isoformat(),
                "total": round(sum(c.total for c in found), 4),
                "byTeamAndPool": [
                    {
                        "team": c.team,
                        "nodePool": c.nodepool,
                        "cost": round(c.cost, 4),
                        "idleCost": round(c.idle_cost, 4),
                        "total": round(c.total, 4),
                        "gpuHours": round(c.gpu_hours, 4),
                        "gpuIdleHours": round(c.gpu_idle_hours, 4),
                    }
                    for c in found
                ],
                "byHour": [
                    {
                        "hour": c.hour.isoformat() if c.hour else None,
                        "team": c.team,
                        "nodePool": c.nodepool,
                        "cost": round(c.cost, 4),
                        "idleCost": round(c.idle_cost, 4),
                    }
                    for c in hourly
                ],
            },
            indent=2,
        )
        + "\n"
    )


# ---- FOCUS ------------------------------------------------------------------------------------------

FOCUS_COLUMNS = (
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
)
"""FOCUS 1.0's columns, in the spec's alphabetical order."""

PROVIDERS = {"aws": "AWS", "gcp": "Google Cloud", "gce": "Google Cloud", "fake": "Fake cloud (provisioner)"}


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _provider(provider_id: str) -> str:
    scheme = provider_id.split("://", 1)[0] if "://" in provider_id else ""
    return PROVIDERS.get(scheme, scheme or "unknown")


def focus_rows(usage: Sequence[UsageRow], *, cluster: str = "") -> list[list[Any]]:
    """FOCUS 1.0 rows: one per node, clock hour and team share (values in `FOCUS_COLUMNS` order)."""
    out = []
    for s in shares(usage):
        u = s.usage
        month = s.hour.replace(day=1, hour=0)
        next_month = (month + timedelta(days=32)).replace(day=1)
        provider = _provider(u.provider_id)
        # Node-hours in this share, so that ListUnitPrice x PricingQuantity = ListCost.
        quantity = round(s.cost / u.price_per_hour, 6) if u.price_per_hour else 0.0
        tags = {
            "provisioner.sh/nodepool": s.nodepool,
            "provisioner.sh/team": s.team,
            "provisioner.sh/allocation": s.kind,
            "provisioner.sh/capacity-type": u.capacity_type,
        }
        cost = round(s.cost, 6)
        values = {
            "AvailabilityZone": u.zone or None,
            "BilledCost": cost,
            "BillingAccountId": cluster or "provisioner",
            "BillingAccountName": cluster or "provisioner",
            "BillingCurrency": "USD",
            "BillingPeriodEnd": _stamp(next_month),
            "BillingPeriodStart": _stamp(month),
            "ChargeCategory": "Usage",
            "ChargeClass": None,
            "ChargeDescription": f"{u.instance_type} {u.capacity_type} node {s.node}, {s.kind} share of {s.team}",
            "ChargeFrequency": "Usage-Based",
            "ChargePeriodEnd": _stamp(s.hour + timedelta(hours=1)),
            "ChargePeriodStart": _stamp(s.hour),
            "CommitmentDiscountCategory": None,
            "CommitmentDiscountId": None,
            "CommitmentDiscountName": None,
            "CommitmentDiscountStatus": None,
            "CommitmentDiscountType": None,
            "ConsumedQuantity": quantity,
            "ConsumedUnit": "Hours",
            "ContractedCost": cost,
            "ContractedUnitPrice": u.price_per_hour,
            "EffectiveCost": cost,
            "InvoiceIssuerName": provider,
            "ListCost": cost,
            "ListUnitPrice": u.price_per_hour,
            "PricingCategory": "Dynamic" if u.capacity_type == "spot" else "Standard",
            "PricingQuantity": quantity,
            "PricingUnit": "Hours",
            "ProviderName": provider,
            "PublisherName": provider,
            "RegionId": u.region or None,
            "RegionName": u.region or None,
            "ResourceId": u.provider_id or s.node,
            "ResourceName": s.node,
            "ResourceType": "Virtual Machine",
            "ServiceCategory": "Compute",
            "ServiceName": "Kubernetes nodes (provisioner)",
            "SkuId": u.instance_type,
            "SkuPriceId": f"{u.instance_type}/{u.capacity_type}/{u.region or '-'}",
            "SubAccountId": s.nodepool,
            "SubAccountName": s.nodepool,
            "Tags": json.dumps(tags, sort_keys=True),
        }
        out.append([values[c] for c in FOCUS_COLUMNS])
    return out


def to_focus_csv(usage: Sequence[UsageRow], *, cluster: str = "") -> str:
    return csv_text(FOCUS_COLUMNS, focus_rows(usage, cluster=cluster))
