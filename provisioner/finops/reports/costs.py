"""Cost by team, pool and hour (showback) from the usage samples.

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

Reserved capacity is paid whether used or not (`ReservationRow`): a node in a reservation is charged at
the reservation's $/h per instance (its own row says $0/h more), divided as above, and what the
reservation was paid beyond its running nodes is its own idle line, charged to its owner (the team its
NodeClass names, else its pool's owner, else "unallocated" on its first pool). So the total is what the
nodes cost plus what the reservations cost: `report reservations`' paid plus on-demand and spot.

The same shares as a FOCUS export are `provisioner.finops.reports.focus`'.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from provisioner.finops.reports.best import Comparison
from provisioner.finops.reports.text import csv_text, largest_remainder, table
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
    usage: UsageRow | None
    """The node's usage row; None on a reservation's idle line."""
    reservation: ReservationRow | None = None
    """The reservation the node runs in, or whose idle part this is."""


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


def _covering(reservations: Sequence[ReservationRow]) -> dict[str, ReservationRow]:
    """Reservation id -> its latest sample (its $/h per instance, kind and owner)."""
    latest: dict[str, ReservationRow] = {}
    for r in reservations:
        if r.reservation_id not in latest or r.time >= latest[r.reservation_id].time:
            latest[r.reservation_id] = r
    return latest


def shares(usage: Sequence[UsageRow], reservations: Sequence[ReservationRow] = ()) -> list[Share]:
    """Every usage row divided into team shares per clock hour (see the module's rules), then each
    reservation's idle part per clock hour as a share of its owner."""
    by_id = _covering(reservations)
    charged: dict[tuple[str, datetime], float] = defaultdict(float)
    out = []
    for row in usage:
        used = row.used_fraction
        weights = [(a.team or NO_TEAM, row.team_fraction(a), a.gpu) for a in row.allocations]
        total_weight = sum(w for _, w, _ in weights)
        if total_weight <= 0:
            used = 0.0
        owner = row.pool_owner or UNALLOCATED
        idle_gpus = max(0, row.gpu_capacity - sum(g for _, _, g in weights))
        reservation = by_id.get(row.reservation_id) if row.reservation_id else None
        # A node in a reservation costs $0/h more; its part of the reservation is its slot's $/h.
        rate = row.price_per_hour + (reservation.price_per_hour if reservation is not None else 0.0)
        for hour, hours in clock_hours(row):
            cost = rate * hours
            if reservation is not None:
                charged[(reservation.reservation_id, hour)] += reservation.price_per_hour * hours
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
                            reservation=reservation,
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
                    reservation=reservation,
                )
            )
    return out + _reservation_idle(reservations, charged)


def _reservation_idle(
    reservations: Sequence[ReservationRow], charged: dict[tuple[str, datetime], float]
) -> list[Share]:
    """Per reservation and clock hour, what it was paid less what its running nodes were charged: its
    own idle line, charged to its owner (`ReservationRow.owner`), else to its first pool's "unallocated".
    Paid covers every instance, so the node shares and these lines add up to what the reservation cost."""
    paid: dict[tuple[str, datetime], list[Any]] = {}
    for r in reservations:
        if r.hours <= 0:
            continue
        for hour, hours in clock_hours(r):
            entry = paid.setdefault((r.reservation_id, hour), [0.0, 0.0, 0.0, r])
            entry[0] += r.instances * r.price_per_hour * hours
            entry[1] += hours
            entry[2] += max(0, r.instances - r.running) * r.gpus_per_instance * hours
            entry[3] = r
    out = []
    for (rid, hour), (cost, hours, gpu_hours, r) in sorted(paid.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        out.append(
            Share(
                hour=hour,
                node=rid,
                nodepool=r.nodepools[0] if r.nodepools else rid,
                team=r.owner or UNALLOCATED,
                kind="reserved-idle",
                hours=hours,
                cost=cost - charged.get((rid, hour), 0.0),
                gpu_hours=gpu_hours,
                usage=None,
                reservation=r,
            )
        )
    return out


@dataclass(slots=True)
class CostLine:
    """Sums for one (team, pool) or (team, pool, hour)."""

    team: str
    nodepool: str
    hour: datetime | None
    reservation: str = ""
    """Set on a reservation's idle line: the reservation's id."""
    cost: float = 0.0
    idle_cost: float = 0.0
    gpu_hours: float = 0.0
    gpu_idle_hours: float = 0.0

    @property
    def total(self) -> float:
        return self.cost + self.idle_cost


def lines(
    usage: Sequence[UsageRow], reservations: Sequence[ReservationRow] = (), *, by_hour: bool = False
) -> list[CostLine]:
    """Showback lines by team and pool (and clock hour with `by_hour`), biggest first (or by hour); a
    reservation's idle part is a line of its own."""
    groups: dict[tuple[str, str, datetime | None, str], CostLine] = {}
    for s in shares(usage, reservations):
        rid = s.node if s.kind == "reserved-idle" else ""
        key = (s.team, s.nodepool, s.hour if by_hour else None, rid)
        line = groups.setdefault(
            key, CostLine(team=s.team, nodepool=s.nodepool, hour=key[2], reservation=rid)
        )
        if s.kind == "workload":
            line.cost += s.cost
            line.gpu_hours += s.gpu_hours
        else:
            line.idle_cost += s.cost
            line.gpu_idle_hours += s.gpu_hours
    if by_hour:
        return sorted(
            groups.values(), key=lambda c: (c.hour or datetime.min, c.team, c.nodepool, c.reservation)
        )
    return sorted(groups.values(), key=lambda c: (-c.total, c.team, c.nodepool, c.reservation))


HEADERS = (
    "Team",
    "Pool",
    "Idle reservation",
    "Workload $",
    "Idle $",
    "Total $",
    "GPU hours",
    "Idle GPU hours",
)
KEYS = ("team", "nodepool", "reservation", "cost", "idle_cost", "total", "gpu_hours", "gpu_idle_hours")


def _values(c: CostLine) -> list[Any]:
    return [
        c.team,
        c.nodepool,
        c.reservation,
        round(c.cost, 2),
        round(c.idle_cost, 2),
        round(c.total, 2),
        round(c.gpu_hours, 2),
        round(c.gpu_idle_hours, 2),
    ]


def to_table(
    usage: Sequence[UsageRow],
    *,
    since: datetime,
    now: datetime,
    width: int | None = None,
    reservations: Sequence[ReservationRow] = (),
    best: Comparison | None = None,
) -> str:
    found = lines(usage, reservations)
    total = sum(c.total for c in found)
    by_team: dict[str, float] = defaultdict(float)
    for c in found:
        by_team[c.team] += c.total
    head = (
        f"Cost by team and pool, {since:%Y-%m-%d %H:%M} to {now:%Y-%m-%d %H:%M} UTC: ${total:,.2f} paid"
        + (f" (reservations ${sum(r.cost for r in reservations):,.2f} of it)" if reservations else "")
        + "\n"
        f"Idle capacity is charged to the pool's owner team (NodePool label provisioner.sh/team), "
        f"else to {UNALLOCATED!r}.\nReserved nodes are charged at their reservation's $/h; a reservation's "
        "idle part is its own line, charged to the team its NodeClass names (label provisioner.sh/team), "
        "else its pool's owner."
        + (f"\nBest possible (this simulated run): {best.sentence()}." if best is not None else "")
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


def to_csv(usage: Sequence[UsageRow], reservations: Sequence[ReservationRow] = ()) -> str:
    """One row per clock hour, team and pool (and idle reservation), then the total. Dollars are in
    cents rounded by largest remainder, so the rows add up to the printed total to the cent (and the
    workload column to its own total; idle is total less workload)."""
    found = lines(usage, reservations, by_hour=True)
    totals = largest_remainder([c.total for c in found])
    workload = largest_remainder([c.cost for c in found])
    rows = []
    for c, total, cost in zip(found, totals, workload, strict=True):
        values = _values(c)
        values[3:6] = [cost, round(total - cost, 2), total]
        rows.append([c.hour.isoformat() if c.hour else "", *values])
    gpu = round(sum(c.gpu_hours for c in found), 2)
    gpu_idle = round(sum(c.gpu_idle_hours for c in found), 2)
    cost, total = round(sum(workload), 2), round(sum(totals), 2)
    rows.append(["", "total", "", "", cost, round(total - cost, 2), total, gpu, gpu_idle])
    return csv_text(("hour", *KEYS), rows)


def to_json(
    usage: Sequence[UsageRow],
    *,
    since: datetime,
    now: datetime,
    reservations: Sequence[ReservationRow] = (),
    best: Comparison | None = None,
) -> str:
    found = lines(usage, reservations)
    hourly = lines(usage, reservations, by_hour=True)
    return (
        json.dumps(
            {
                "since": since.isoformat(),
                "now": now.isoformat(),
                "total": round(sum(c.total for c in found), 4),
                "bestPossible": best.to_dict() if best is not None else None,
                "byTeamAndPool": [
                    {
                        "team": c.team,
                        "nodePool": c.nodepool,
                        "reservation": c.reservation or None,
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
                        "reservation": c.reservation or None,
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
