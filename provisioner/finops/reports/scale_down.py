"""The scale-down report: what disruption removed and really saved, what the fleet cost, what idle
capacity still costs, the churn it caused, and what kept nodes alive.

The money rules (each has a test in tests/finops/test_money.py):
- *Claimed* $/h of an action is `provisioner.finops.money`'s one rule applied to its row: the node's
  $/h minus its share of the replacements really launched, less the bare pods' share, for moves made to
  save money; expiration, drift and a Capacity Block ending claim nothing, and what they changed the
  fleet's $/h by is its own column ("Not a saving"), never added to the savings.
- Pods nothing recreates are *workload evicted*, with their share of the node's $/h, never a saving.
- *Churn*: a node launched within `CHURN_WINDOW` after an action, for pods of the workloads that action
  moved (and not a replacement of any action: that is the launching action's own doing), is charged
  back, node by node: its cost (from the usage samples, up to
  `now`) comes off that action's realized savings, split evenly when it follows several actions.
- *Realized* savings of an action are its claimed $/h over the hours from the action (or the window's
  start) to `now`, minus its churn charge; they may be negative. The *run-rate* is the window's claimed
  $/h times 730 h, an estimate of a month ahead. The two are shown side by side and never added.
- *Paid* is what the fleet cost: the usage samples' hours times their $/h (`provisioner.finops.meter`
  bills each node from launch to deletion). `simulate` prints this same figure for its run.
- Reserved capacity is paid whether used or not: a reserved node's row costs $0/h more, so moving a node
  from on-demand into a reservation with room saves the whole on-demand price. What the reservations
  themselves cost, and their idle part, come from their own samples (`reservations`), beside Paid and
  never added to it.

Past 500 lines because the report is built and rendered (table, CSV, JSON) in one place, so every format
carries the same figures; the HTML page is `html`'s and reservation utilization `reservations`'.

An action naming several teams splits its money evenly among them; what teams paid is divided as
`costs` divides it (requests, and idle to the pool's owner or "unallocated"), so team totals add up to the
total and agree with `provisioner report costs`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from provisioner.finops import window
from provisioner.finops.reports import best as best_possible
from provisioner.finops.reports import churn as churn_
from provisioner.finops.reports import costs, html
from provisioner.finops.reports import reservations as reserved
from provisioner.finops.reports.text import csv_text, plural, table
from provisioner.finops.rows import HOURS_PER_MONTH, ActionRow, BestRow, BlockerRow, ReservationRow, UsageRow

NO_TEAM = costs.NO_TEAM
CHURN_WINDOW = churn_.CHURN_WINDOW
churn_charges = churn_.charges


@dataclass(slots=True)
class Totals:
    """Sums for one group (the whole window, a pool, a team or a reason)."""

    name: str
    nodes_removed: int = 0
    nodes_replaced: int = 0
    pods_moved: float = 0
    pods_evicted: float = 0
    """Bare pods evicted for good (workload evicted)."""
    evicted_per_hour: float = 0.0
    savings_per_hour: float = 0.0
    forced_change_per_hour: float = 0.0
    """What moves made for another reason than saving (expiration, drift, a Capacity Block ending...)
    changed the fleet's $/h by (positive: it fell); shown beside the savings, never counted in them."""
    churn_cost: float = 0.0
    realized_savings: float = 0.0
    run_rate_monthly: float = 0.0
    cost: float = 0.0
    idle_cost: float = 0.0
    gpu_idle_hours: float = 0.0

    def add_action(self, row: ActionRow, *, realized: float, churn: float, share: float = 1.0) -> None:
        if share == 1.0:
            if row.action == "replace":
                self.nodes_replaced += 1
            else:
                self.nodes_removed += 1
        self.pods_moved += row.pods_moved * share
        self.pods_evicted += len(row.evicted_pods) * share
        self.evicted_per_hour += row.evicted_per_hour * share
        claimed = row.claimed_per_hour
        self.savings_per_hour += claimed * share
        if not row.is_saving:
            self.forced_change_per_hour += row.change_per_hour * share
        self.churn_cost += churn * share
        self.realized_savings += realized * share
        self.run_rate_monthly += claimed * HOURS_PER_MONTH * share

    def add_usage(self, money: UsageMoney) -> None:
        self.cost += money.cost
        self.idle_cost += money.idle_cost
        self.gpu_idle_hours += money.gpu_idle_hours


class UsageMoney(NamedTuple):
    """What one usage row adds to a group: worked out once per row, whichever groups it counts in."""

    cost: float
    idle_cost: float
    gpu_idle_hours: float

    @classmethod
    def of(cls, row: UsageRow) -> UsageMoney:
        return cls(row.cost, row.idle_cost, row.gpu_idle_hours)


@dataclass(slots=True)
class BlockerCount:
    kind: str
    detail: str
    nodepool: str
    evaluations: int
    nodes: int


@dataclass(slots=True)
class Churn:
    pods_moved: int = 0
    pods_evicted: int = 0
    nodes_replaced: int = 0
    nodes_removed: int = 0
    nodes_launched_again: int = 0
    """Nodes launched within the churn window for pods an action had just moved (charged back)."""
    cost: float = 0.0
    """What those nodes cost, up to `now`."""
    replacements_disrupted_within_hour: int = 0
    """Replacement nodes that were themselves disrupted less than an hour after they were launched."""


@dataclass(frozen=True, slots=True)
class ActionView:
    """An action row with the money the report works out for it."""

    row: ActionRow
    realized: float
    churn: float


@dataclass(slots=True)
class ScaleDownReport:
    since: datetime
    now: datetime
    pool: str | None
    total: Totals
    pools: list[Totals] = field(default_factory=list)
    teams: list[Totals] = field(default_factory=list)
    reasons: list[Totals] = field(default_factory=list)
    churn: Churn = field(default_factory=Churn)
    blockers: list[BlockerCount] = field(default_factory=list)
    cost_per_hour: dict[str, list[tuple[datetime, float]]] = field(default_factory=dict)
    """Pool -> ($ paid in each clock hour, from the usage rows), every hour of the window, zeros included."""
    actions: list[ActionView] = field(default_factory=list)
    reservations: reserved.ReservationReport | None = None
    """Reservation utilization over the window; None when the ledger has no reservation samples."""
    best: best_possible.Comparison | None = None
    """Paid beside the best possible (a simulated run's `--best-possible`); None without its rows."""
    best_per_hour: list[tuple[datetime, float]] = field(default_factory=list)
    """The best possible $ in each clock hour, for the chart beside what was paid."""

    @property
    def run_rate_per_hour(self) -> float:
        return self.total.savings_per_hour


def build(
    actions: Sequence[ActionRow],
    blockers: Sequence[BlockerRow],
    usage: Sequence[UsageRow],
    *,
    since: datetime,
    now: datetime,
    pool: str | None = None,
    top_blockers: int = 10,
    reservations: Sequence[ReservationRow] = (),
    best: Sequence[BestRow] = (),
) -> ScaleDownReport:
    """The report over [since, now) for one pool or all. Rows outside the window or pool are ignored."""
    utilization = reserved.build(reservations, since=since, now=now, pool=pool)

    def keep(row: ActionRow | BlockerRow | UsageRow) -> bool:
        return since <= row.time < now and (pool is None or row.nodepool == pool)

    actions = [a for a in actions if keep(a)]
    blockers = [b for b in blockers if keep(b)]
    usage = [u for u in window.clip(usage, since=since, now=now) if keep(u)]
    charges, relaunched = churn_charges(actions, usage, now=now)
    views = [
        ActionView(
            row=a,
            realized=a.claimed_per_hour * max(0.0, (now - max(a.time, since)).total_seconds() / 3600) - c,
            churn=c,
        )
        for a, c in zip(actions, charges, strict=True)
    ]
    total = Totals("total")
    by_pool: dict[str, Totals] = {}
    by_team: dict[str, Totals] = {}
    by_reason: dict[str, Totals] = {}
    for view in views:
        row = view.row
        money = {"realized": view.realized, "churn": view.churn}
        total.add_action(row, **money)
        by_pool.setdefault(row.nodepool, Totals(row.nodepool)).add_action(row, **money)
        by_reason.setdefault(row.reason, Totals(row.reason)).add_action(row, **money)
        teams = row.teams or (NO_TEAM,)
        for team in teams:
            group = by_team.setdefault(team, Totals(team))
            share = 1.0 / len(teams)
            group.add_action(row, **money, share=share)
            # Node counts are whole: attribute the node to its first team, the money evenly.
            if share != 1.0 and team == teams[0]:
                if row.action == "replace":
                    group.nodes_replaced += 1
                else:
                    group.nodes_removed += 1
    paid_by_row = [UsageMoney.of(sample) for sample in usage]
    for sample, paid in zip(usage, paid_by_row, strict=True):
        total.add_usage(paid)
        by_pool.setdefault(sample.nodepool, Totals(sample.nodepool)).add_usage(paid)
    # Teams pay as the showback divides each node (`costs`): their requests' share, and the idle part to
    # the pool's owner team or "unallocated"; so the team rows agree with `report costs`.
    for part in costs.shares(usage):
        payer = by_team.setdefault(part.team, Totals(part.team))
        payer.cost += part.cost
        if part.kind == "idle":
            payer.idle_cost += part.cost
            payer.gpu_idle_hours += part.gpu_hours
    # Usage rows carry no reason: put the paid and idle figures of a reason's nodes beside it.
    reason_of_node = {v.row.node: v.row.reason for v in views}
    for sample, paid in zip(usage, paid_by_row, strict=True):
        reason = reason_of_node.get(sample.node)
        if reason is not None:
            by_reason[reason].add_usage(paid)
    churn = Churn(
        pods_moved=sum(a.pods_moved for a in actions),
        pods_evicted=sum(len(a.evicted_pods) for a in actions),
        nodes_replaced=sum(1 for a in actions if a.action == "replace"),
        nodes_removed=sum(1 for a in actions if a.action == "delete"),
        nodes_launched_again=relaunched,
        cost=sum(charges),
    )
    born: dict[str, datetime] = {}
    for row in actions:
        for name in row.replacement_nodes:
            born.setdefault(name, row.time)
    for row in actions:
        started = born.get(row.node)
        if started is not None and timedelta(0) <= row.time - started < CHURN_WINDOW:
            churn.replacements_disrupted_within_hour += 1
    grouped: dict[tuple[str, str, str], tuple[set[str], set[str]]] = {}
    for b in blockers:
        evaluations, nodes = grouped.setdefault((b.kind, b.detail, b.nodepool), (set(), set()))
        evaluations.add(b.evaluation_id)
        nodes.add(b.node)
    counts = [
        BlockerCount(kind=k, detail=d, nodepool=p, evaluations=len(ev), nodes=len(nodes))
        for (k, d, p), (ev, nodes) in grouped.items()
    ]
    counts.sort(key=lambda c: (-c.evaluations * c.nodes, c.kind, c.detail))

    def ordered(groups: dict[str, Totals]) -> list[Totals]:
        return sorted(groups.values(), key=lambda t: (-t.savings_per_hour, -t.cost, t.name))

    return ScaleDownReport(
        since=since,
        now=now,
        pool=pool,
        total=total,
        pools=ordered(by_pool),
        teams=ordered(by_team),
        reasons=ordered(by_reason),
        churn=churn,
        blockers=counts[:top_blockers],
        cost_per_hour=hourly_cost(usage, since=since, now=now),
        actions=views,
        reservations=utilization if utilization.reservations else None,
        best=best_possible.compare(best, usage, realized=total.realized_savings, since=since, now=now),
        best_per_hour=best_possible.per_hour(best, since=since, now=now),
    )


def hourly_cost(
    usage: Sequence[UsageRow], *, since: datetime, now: datetime
) -> dict[str, list[tuple[datetime, float]]]:
    """Pool -> $ paid in each clock hour from the first sample (or `since`, if later) to `now`: a sample
    spanning hours adds to each in proportion, and an hour with no node is a zero (a pool scaled to zero
    draws its line down to 0)."""
    start = max([since, min((r.time for r in usage), default=since)])
    first = start.replace(minute=0, second=0, microsecond=0)
    hours: list[datetime] = []
    hour = first
    while hour < now:
        hours.append(hour)
        hour += timedelta(hours=1)
    buckets: dict[str, dict[datetime, float]] = defaultdict(lambda: dict.fromkeys(hours, 0.0))
    for row in usage:
        start, end = row.time, row.time + timedelta(hours=row.hours)
        hour = start.replace(minute=0, second=0, microsecond=0)
        while hour < end:
            overlap = (min(end, hour + timedelta(hours=1)) - max(start, hour)).total_seconds() / 3600
            series = buckets[row.nodepool]
            series[hour] = series.get(hour, 0.0) + row.price_per_hour * overlap
            hour += timedelta(hours=1)
    return {p: sorted(values.items()) for p, values in sorted(buckets.items())}


# ---- renderings ------------------------------------------------------------------------------------

COLUMNS = (
    ("name", "Name"),
    ("nodes_removed", "Nodes removed"),
    ("nodes_replaced", "Nodes replaced"),
    ("pods_moved", "Pods moved"),
    ("pods_evicted", "Bare pods evicted"),
    ("evicted_per_hour", "Evicted workload $/h"),
    ("savings_per_hour", "Saved $/h"),
    ("forced_change_per_hour", "Not a saving: fleet $/h fell by"),
    ("churn_cost", "Churn charged $"),
    ("realized_savings", "Realized savings $"),
    ("run_rate_monthly", "Run-rate $/month"),
    ("cost", "Paid $"),
    ("idle_cost", "Idle $"),
    ("gpu_idle_hours", "GPU idle hours"),
)
"""(machine key for CSV and JSON, header in words for tables and HTML)."""
KEYS = tuple(k for k, _ in COLUMNS)
HEADERS = tuple(h for _, h in COLUMNS)


def _count(value: float) -> float | int:
    """A count shared among teams may be fractional; a whole one prints as an integer."""
    return int(value) if float(value).is_integer() else round(value, 2)


def totals_row(t: Totals) -> list[Any]:
    return [
        t.name,
        t.nodes_removed,
        t.nodes_replaced,
        _count(t.pods_moved),
        _count(t.pods_evicted),
        round(t.evicted_per_hour, 4),
        round(t.savings_per_hour, 4),
        round(t.forced_change_per_hour, 4),
        round(t.churn_cost, 2),
        round(t.realized_savings, 2),
        round(t.run_rate_monthly, 2),
        round(t.cost, 2),
        round(t.idle_cost, 2),
        round(t.gpu_idle_hours, 2),
    ]


def _dollars(value: float) -> str:
    """-$55.04 rather than $-55.04."""
    return f"{'-' if value < -0.005 else ''}${abs(value):,.2f}"


def headline(report: ScaleDownReport) -> list[tuple[str, str]]:
    """The figures a reviewer reads first, as (label, value)."""
    t = report.total
    extra = reserved.headline(report.reservations) if report.reservations else []
    if report.reservations:
        # What `report costs` totals: the nodes, and the reservations paid whether used or not.
        held = report.reservations.total.cost
        everything = f"${t.cost + held:,.2f} (nodes ${t.cost:,.2f} + reservations ${held:,.2f})"
        extra = [("Paid with reservations", everything), *extra]
    return [
        ("Total paid", f"${t.cost:,.2f}"),
        ("Realized savings", f"${t.realized_savings:,.2f}"),
        ("Run-rate saved", f"${t.savings_per_hour:,.2f}/h (${t.run_rate_monthly:,.0f} per 730 h month)"),
        (
            "Not a saving (expiration, drift, block ends): fleet $/h fell by",
            _dollars(t.forced_change_per_hour) + "/h",
        ),
        ("Idle cost", f"${t.idle_cost:,.2f}"),
        ("GPU idle", f"{t.gpu_idle_hours:,.1f} GPU-hours"),
        ("Workload evicted", f"{t.pods_evicted:,.0f} bare pods, ${t.evicted_per_hour:,.2f}/h"),
        (
            "Churn charged back",
            f"${report.churn.cost:,.2f} ({plural(report.churn.nodes_launched_again, 'node')})",
        ),
        *([("Best possible", report.best.sentence())] if report.best is not None else []),
        *extra,
    ]


ACTION_HEADERS = (
    "Time",
    "Action",
    "Node",
    "Pool",
    "Reason",
    "Before",
    "After",
    "Saved $/h",
    "Fleet $/h fell by",
    "Realized $",
    "Pods moved",
    "Bare pods evicted",
)


def action_values(view: ActionView) -> list[Any]:
    a = view.row
    before = f"{a.instance_type} {a.capacity_type} ${a.price_per_hour:.4f}/h"
    after = (
        f"{a.replacement_type} {a.replacement_capacity_type} ${a.replacement_price_per_hour:.4f}/h"
        if a.replacement_type
        else "removed"
    )
    return [
        f"{a.time:%m-%d %H:%M}",
        a.action,
        a.node,
        a.nodepool,
        a.reason,
        before,
        after,
        round(a.claimed_per_hour, 4) if a.is_saving else "not a saving",
        round(a.change_per_hour, 4),
        round(view.realized, 2),
        a.pods_moved,
        len(a.evicted_pods),
    ]


def to_table(report: ScaleDownReport, *, width: int | None = None) -> str:
    scope = f"pool {report.pool}" if report.pool else "all pools"
    head = f"Scale-down report, {scope}, {report.since:%Y-%m-%d %H:%M} to {report.now:%Y-%m-%d %H:%M} UTC"
    figures = "\n".join(f"  {label}: {value}" for label, value in headline(report))
    churn = report.churn
    sections = [
        head + "\n" + figures,
        table(HEADERS, [totals_row(t) for t in report.pools], title="By pool", width=width),
        table(HEADERS, [totals_row(t) for t in report.teams], title="By team", width=width),
        table(HEADERS, [totals_row(t) for t in report.reasons], title="By reason", width=width),
        table(ACTION_HEADERS, [action_values(v) for v in report.actions], title="Actions", width=width),
        table(
            (
                "Pods moved",
                "Bare pods evicted",
                "Nodes removed",
                "Nodes replaced",
                "Launched again",
                "Churn $",
                "Replacements disrupted within 1 h",
            ),
            [
                [
                    churn.pods_moved,
                    churn.pods_evicted,
                    churn.nodes_removed,
                    churn.nodes_replaced,
                    churn.nodes_launched_again,
                    round(churn.cost, 2),
                    churn.replacements_disrupted_within_hour,
                ]
            ],
            title="Churn",
            width=width,
        ),
        table(
            ("Blocker", "Pool", "Evaluations", "Nodes", "Detail"),
            [[b.kind, b.nodepool, b.evaluations, b.nodes, b.detail] for b in report.blockers],
            title="Top blockers",
            width=width,
        ),
    ]
    if report.reservations:
        sections.append(
            table(
                reserved.narrow(list(reserved.HEADERS)),
                [reserved.narrow(reserved.values(u)) for u in report.reservations.reservations],
                title="Reservations (paid whether used or not)",
                width=width,
            )
        )
    return "\n\n".join(sections) + "\n"


def to_csv(report: ScaleDownReport) -> str:
    """One row per group, with the group's section first: total, pool, team, reason, blocker, churn."""
    headers = ("section", *KEYS, "count", "detail")
    rows: list[list[Any]] = [["total", *totals_row(report.total), "", ""]]
    for section, groups in (("pool", report.pools), ("team", report.teams), ("reason", report.reasons)):
        rows += [[section, *totals_row(t), "", ""] for t in groups]
    blanks = [""] * (len(KEYS) - 1)
    rows += [
        ["blocker", b.kind, *blanks, b.evaluations, f"{b.nodepool}: {b.detail}"] for b in report.blockers
    ]
    churn = report.churn
    rows.append(["churn", "nodes_launched_again", *blanks, churn.nodes_launched_again, f"${churn.cost:.2f}"])
    rows.append(
        ["churn", "replacements_disrupted_within_1h", *blanks, churn.replacements_disrupted_within_hour, ""]
    )
    # A reservation's row: its idle $ and idle GPU-hours in those columns, paid in `cost`, the rest in words.
    for u in report.reservations.reservations if report.reservations else ():
        money: dict[str, Any] = dict.fromkeys(KEYS, "")
        money.update(name=u.name, cost=round(u.cost, 2), idle_cost=round(u.idle_cost, 2))
        money.update(gpu_idle_hours=round(u.gpu_idle_hours, 2))
        detail = (
            f"{u.instances}x {u.instance_type} in {u.zone} ({u.kind}); used {u.utilization:.1%} of "
            f"{u.instance_hours:.2f} instance-hours; pools {','.join(u.nodepools) or '-'}"
        )
        rows.append(["reservation", *money.values(), u.instances, detail])
    return csv_text(headers, rows)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p.title() for p in rest)


def to_dict(report: ScaleDownReport) -> dict[str, Any]:
    def totals(t: Totals) -> dict[str, Any]:
        return {_camel(k): v for k, v in zip(KEYS, totals_row(t), strict=True)}

    churn = report.churn
    return {
        "since": report.since.isoformat(),
        "now": report.now.isoformat(),
        "pool": report.pool,
        "total": totals(report.total),
        "pools": [totals(t) for t in report.pools],
        "teams": [totals(t) for t in report.teams],
        "reasons": [totals(t) for t in report.reasons],
        "churn": {
            "podsMoved": churn.pods_moved,
            "podsEvicted": churn.pods_evicted,
            "nodesRemoved": churn.nodes_removed,
            "nodesReplaced": churn.nodes_replaced,
            "nodesLaunchedAgain": churn.nodes_launched_again,
            "cost": round(churn.cost, 4),
            "replacementsDisruptedWithinHour": churn.replacements_disrupted_within_hour,
        },
        "topBlockers": [
            {
                "kind": b.kind,
                "detail": b.detail,
                "nodePool": b.nodepool,
                "evaluations": b.evaluations,
                "nodes": b.nodes,
            }
            for b in report.blockers
        ],
        "costPerHour": {
            pool: [{"time": t.isoformat(), "dollars": round(v, 4)} for t, v in points]
            for pool, points in report.cost_per_hour.items()
        },
        "reservations": reserved.to_dict(report.reservations) if report.reservations else None,
        "bestPossible": report.best.to_dict() if report.best is not None else None,
        "actions": [
            {
                "time": v.row.time.isoformat(),
                "action": v.row.action,
                "node": v.row.node,
                "nodePool": v.row.nodepool,
                "teams": list(v.row.teams),
                "reason": v.row.reason,
                "method": v.row.method,
                "instanceType": v.row.instance_type,
                "capacityType": v.row.capacity_type,
                "zone": v.row.zone,
                "pricePerHour": v.row.price_per_hour,
                "replacement": v.row.replacement_type,
                "replacementCapacityType": v.row.replacement_capacity_type,
                "replacementPricePerHour": round(v.row.replacement_price_per_hour, 6),
                "replacementNodes": list(v.row.replacement_nodes),
                "savingsPerHour": round(v.row.claimed_per_hour, 6),
                "isSaving": v.row.is_saving,
                "changePerHour": round(v.row.change_per_hour, 6),
                "evictedPods": list(v.row.evicted_pods),
                "evictedPerHour": round(v.row.evicted_per_hour, 6),
                "pods": list(v.row.pods),
                "churnCost": round(v.churn, 4),
                "realizedSavings": round(v.realized, 4),
            }
            for v in report.actions
        ],
    }


def to_json(report: ScaleDownReport) -> str:
    return json.dumps(to_dict(report), indent=2) + "\n"


def to_html(report: ScaleDownReport) -> str:
    return html.scale_down_page(
        report,
        headline=headline(report),
        totals=(
            HEADERS,
            {
                "pool": [totals_row(t) for t in report.pools],
                "team": [totals_row(t) for t in report.teams],
                "reason": [totals_row(t) for t in report.reasons],
            },
        ),
        actions=(ACTION_HEADERS, [action_values(v) for v in report.actions]),
    )


RENDERERS = {"table": to_table, "csv": to_csv, "json": to_json, "html": to_html}
