"""Reservation utilization: what each reservation (an AWS capacity reservation or Capacity Block, a GCP
reservation) cost, how much of it ran and was used, and what its idle part cost, in all and per clock hour.

The rules, from the ledger's reservation samples (`provisioner.finops.rows.ReservationRow`):
- *Paid* is every instance the reservation holds, every hour it exists, at its $/h per instance: it is
  paid whether used or not (the node rows price reserved nodes at $0/h more, so this is the only place
  that money shows).
- *Used* instance-hours count each running node by how much of it pods request (GPUs on a GPU type, else
  the busier of CPU and memory), as the scale-down report measures nodes; *idle* is the rest, empty slots
  included, and *idle cost* is the idle instance-hours at the reservation's $/h.
- *Idle GPU-hours* are reserved GPUs no pod requests: on empty slots and on running nodes alike.

Pure: rows in, values and text out; `since`, `now` and the pool come in.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from provisioner.finops import window
from provisioner.finops.reports.costs import clock_hours
from provisioner.finops.reports.text import csv_text, table
from provisioner.finops.rows import ReservationRow


@dataclass(slots=True)
class Utilization:
    """Sums for one reservation (or all of them, or one reservation in one clock hour)."""

    name: str
    kind: str = ""
    instance_type: str = ""
    zone: str = ""
    nodepools: tuple[str, ...] = ()
    instances: int = 0
    """The most instances it held in the window."""
    ends_at: datetime | None = None
    instance_hours: float = 0.0
    used_hours: float = 0.0
    cost: float = 0.0
    idle_cost: float = 0.0
    gpu_hours: float = 0.0
    gpu_idle_hours: float = 0.0

    @property
    def idle_hours(self) -> float:
        return max(0.0, self.instance_hours - self.used_hours)

    @property
    def utilization(self) -> float:
        """Used instance-hours over those paid for (0 when none were)."""
        return self.used_hours / self.instance_hours if self.instance_hours else 0.0

    def add(self, row: ReservationRow, *, hours: float) -> None:
        """`hours` of the row (all of it, or its part in one clock hour)."""
        share = hours / row.hours
        self.instances = max(self.instances, row.instances)
        self.instance_hours += row.instances * hours
        self.used_hours += row.used_instance_hours * share
        self.cost += row.cost * share
        self.idle_cost += row.idle_cost * share
        self.gpu_hours += row.gpu_hours * share
        self.gpu_idle_hours += row.gpu_idle_hours * share


@dataclass(slots=True)
class HourLine:
    hour: datetime
    usage: Utilization


@dataclass(slots=True)
class ReservationReport:
    since: datetime
    now: datetime
    pool: str | None
    total: Utilization
    reservations: list[Utilization] = field(default_factory=list)
    hours: list[HourLine] = field(default_factory=list)
    """Per clock hour and reservation, in time order."""


def build(
    rows: Sequence[ReservationRow], *, since: datetime, now: datetime, pool: str | None = None
) -> ReservationReport:
    """The report over [since, now) for the reservations one pool may launch into, or all."""
    rows = [
        r
        for r in window.clip(rows, since=since, now=now)
        if (pool is None or pool in r.nodepools) and r.hours > 0
    ]
    total = Utilization("total")
    by_id: dict[str, Utilization] = {}
    by_hour: dict[tuple[datetime, str], Utilization] = {}
    for row in rows:
        group = by_id.setdefault(row.reservation_id, _named(row))
        group.ends_at = row.ends_at
        group.add(row, hours=row.hours)
        total.add(row, hours=row.hours)
        for hour, hours in clock_hours(row):
            key = (hour, row.reservation_id)
            by_hour.setdefault(key, _named(row)).add(row, hours=hours)
    # The total's instance count is what was held at once at the most, not the largest single reservation.
    total.instances = sum(u.instances for u in by_id.values())
    return ReservationReport(
        since=since,
        now=now,
        pool=pool,
        total=total,
        reservations=sorted(by_id.values(), key=lambda u: (-u.idle_cost, u.name)),
        hours=[HourLine(hour=h, usage=u) for (h, _), u in sorted(by_hour.items())],
    )


def _named(row: ReservationRow) -> Utilization:
    return Utilization(
        row.reservation_id,
        kind=row.kind,
        instance_type=row.instance_type,
        zone=row.zone,
        nodepools=row.nodepools,
        ends_at=row.ends_at,
    )


def headline(report: ReservationReport) -> list[tuple[str, str]]:
    """The figures the scale-down report's headline carries for reserved capacity."""
    t = report.total
    return [
        ("Reserved paid", f"${t.cost:,.2f} ({t.utilization:.0%} used)"),
        ("Idle reserved", f"${t.idle_cost:,.2f}"),
        ("Idle reserved GPUs", f"{t.gpu_idle_hours:,.1f} GPU-hours of {t.gpu_hours:,.1f}"),
    ]


# ---- renderings ------------------------------------------------------------------------------------

COLUMNS = (
    ("name", "Reservation"),
    ("kind", "Kind"),
    ("instance_type", "Type"),
    ("zone", "Zone"),
    ("nodepools", "Pools"),
    ("instances", "Instances"),
    ("ends_at", "Ends"),
    ("instance_hours", "Instance-hours"),
    ("used_hours", "Used"),
    ("idle_hours", "Idle"),
    ("utilization", "Used %"),
    ("cost", "Paid $"),
    ("idle_cost", "Idle $"),
    ("gpu_hours", "GPU-hours"),
    ("gpu_idle_hours", "Idle GPU-hours"),
)
"""(machine key for CSV and JSON, header in words for tables and HTML)."""
KEYS = tuple(k for k, _ in COLUMNS)
HEADERS = tuple(h for _, h in COLUMNS)
TABLE_KEYS = tuple(k for k in KEYS if k not in ("nodepools", "ends_at", "instance_hours"))
"""The terminal table leaves the pools, the end and the instance-hours to CSV, JSON and HTML."""
HOUR_HEADERS = ("Hour", "Reservation", "Instance-hours", "Used", "Idle", "Idle $", "Idle GPU-hours")


def values(u: Utilization) -> list[Any]:
    return [
        u.name,
        u.kind,
        u.instance_type,
        u.zone,
        list(u.nodepools),
        u.instances,
        f"{u.ends_at:%Y-%m-%d %H:%M}" if u.ends_at else None,
        round(u.instance_hours, 2),
        round(u.used_hours, 2),
        round(u.idle_hours, 2),
        round(100 * u.utilization, 1),
        round(u.cost, 2),
        round(u.idle_cost, 2),
        round(u.gpu_hours, 2),
        round(u.gpu_idle_hours, 2),
    ]


def hour_values(line: HourLine) -> list[Any]:
    u = line.usage
    return [
        f"{line.hour:%m-%d %H:%M}",
        u.name,
        round(u.instance_hours, 2),
        round(u.used_hours, 2),
        round(u.idle_hours, 2),
        round(u.idle_cost, 2),
        round(u.gpu_idle_hours, 2),
    ]


def narrow(row: list[Any]) -> list[Any]:
    return [v for k, v in zip(KEYS, row, strict=True) if k in TABLE_KEYS]


def to_table(report: ReservationReport, *, width: int | None = None) -> str:
    scope = f"pool {report.pool}" if report.pool else "all pools"
    head = (
        f"Reservation utilization, {scope}, {report.since:%Y-%m-%d %H:%M} to {report.now:%Y-%m-%d %H:%M} "
        "UTC\n" + "\n".join(f"  {label}: {value}" for label, value in headline(report))
    )
    return (
        "\n\n".join(
            [
                head,
                table(
                    narrow(list(HEADERS)),
                    [narrow(values(u)) for u in report.reservations],
                    title="By reservation",
                    width=width,
                ),
                table(HOUR_HEADERS, [hour_values(h) for h in report.hours], title="By hour", width=width),
            ]
        )
        + "\n"
    )


def to_csv(report: ReservationReport) -> str:
    """One row per clock hour and reservation, then one per reservation (hour empty), then the total."""
    rows: list[list[Any]] = [[line.hour.isoformat(), *values(line.usage)] for line in report.hours]
    rows += [["", *values(u)] for u in report.reservations]
    rows.append(["", *values(report.total)])
    return csv_text(("hour", *KEYS), rows)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p.title() for p in rest)


def utilization_dict(u: Utilization) -> dict[str, Any]:
    out = {_camel(k): v for k, v in zip(KEYS, values(u), strict=True)}
    out["id"] = out.pop("name")
    out["endsAt"] = u.ends_at.isoformat() if u.ends_at else None
    return out


def to_dict(report: ReservationReport) -> dict[str, Any]:
    total = utilization_dict(report.total)
    for key in ("id", "kind", "instanceType", "zone", "nodepools", "endsAt"):
        total.pop(key)
    return {
        "since": report.since.isoformat(),
        "now": report.now.isoformat(),
        "pool": report.pool,
        "total": total,
        "reservations": [utilization_dict(u) for u in report.reservations],
        "hours": [
            {
                "hour": line.hour.isoformat(),
                "reservation": line.usage.name,
                "instanceHours": round(line.usage.instance_hours, 4),
                "usedHours": round(line.usage.used_hours, 4),
                "idleHours": round(line.usage.idle_hours, 4),
                "idleCost": round(line.usage.idle_cost, 4),
                "gpuIdleHours": round(line.usage.gpu_idle_hours, 4),
            }
            for line in report.hours
        ],
    }


def to_json(report: ReservationReport) -> str:
    return json.dumps(to_dict(report), indent=2) + "\n"


RENDERERS = {"table": to_table, "csv": to_csv, "json": to_json}
