"""The scale-down report: what disruption removed and saved, what idle capacity still costs, how much
churn it caused, and what kept nodes alive.

Savings are counted once per action row. *Realized* savings are the $/h saved times the hours since the
action (up to `now`); the *run-rate* is the $/h saved by the window's actions times 730 h, an estimate of
a month ahead. The two are shown side by side and never added together. A row naming several teams
splits its savings evenly among them, so team totals add up to the pool totals.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from html import escape
from typing import Any

from provisioner.finops.reports import svg
from provisioner.finops.reports.text import csv_text, table
from provisioner.finops.rows import HOURS_PER_MONTH, ActionRow, BlockerRow, UsageRow

NO_TEAM = "(no team)"
CHURN_WINDOW = timedelta(hours=1)


@dataclass(slots=True)
class Totals:
    """Sums for one group (the whole window, a pool, a team or a reason)."""

    name: str
    nodes_removed: int = 0
    nodes_replaced: int = 0
    pods_evicted: float = 0
    savings_per_hour: float = 0.0
    realized_savings: float = 0.0
    run_rate_monthly: float = 0.0
    cost: float = 0.0
    idle_cost: float = 0.0
    gpu_idle_hours: float = 0.0

    def add_action(self, row: ActionRow, *, now: datetime, share: float = 1.0) -> None:
        if row.action == "replace":
            self.nodes_replaced += 1 if share == 1.0 else 0
        else:
            self.nodes_removed += 1 if share == 1.0 else 0
        self.pods_evicted += row.pods_moved * share
        self.savings_per_hour += row.savings_per_hour * share
        self.realized_savings += realized(row, now=now) * share
        self.run_rate_monthly += row.savings_per_hour * HOURS_PER_MONTH * share

    def add_usage(self, row: UsageRow, *, share: float = 1.0) -> None:
        self.cost += row.cost * share
        self.idle_cost += row.idle_cost * share
        self.gpu_idle_hours += row.gpu_idle_hours * share


@dataclass(slots=True)
class BlockerCount:
    kind: str
    detail: str
    nodepool: str
    evaluations: int
    nodes: int


@dataclass(slots=True)
class Churn:
    pods_evicted: int = 0
    nodes_replaced: int = 0
    nodes_removed: int = 0
    replacements_disrupted_within_hour: int = 0
    """Replacement nodes that were themselves disrupted less than an hour after they were planned."""


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
    """Pool -> ($/h paid, per hour bucket), from the usage rows."""
    actions: list[ActionRow] = field(default_factory=list)


def realized(row: ActionRow, *, now: datetime) -> float:
    """$ saved by one action so far: its $/h saved times the hours since it happened."""
    hours = max(0.0, (now - row.time).total_seconds() / 3600)
    return row.savings_per_hour * hours


def build(
    actions: Sequence[ActionRow],
    blockers: Sequence[BlockerRow],
    usage: Sequence[UsageRow],
    *,
    since: datetime,
    now: datetime,
    pool: str | None = None,
    top_blockers: int = 10,
) -> ScaleDownReport:
    """The report over [since, now) for one pool or all. Rows outside the window or pool are ignored."""

    def keep(row: Any) -> bool:
        return since <= row.time < now and (pool is None or row.nodepool == pool)

    actions = [a for a in actions if keep(a)]
    blockers = [b for b in blockers if keep(b)]
    usage = [u for u in usage if keep(u)]
    total = Totals("total")
    by_pool: dict[str, Totals] = {}
    by_team: dict[str, Totals] = {}
    by_reason: dict[str, Totals] = {}
    for row in actions:
        total.add_action(row, now=now)
        by_pool.setdefault(row.nodepool, Totals(row.nodepool)).add_action(row, now=now)
        by_reason.setdefault(row.reason, Totals(row.reason)).add_action(row, now=now)
        teams = row.teams or (NO_TEAM,)
        for team in teams:
            group = by_team.setdefault(team, Totals(team))
            share = 1.0 / len(teams)
            group.add_action(row, now=now, share=share)
            # Node counts are whole: attribute the node to its first team, the money evenly.
            if share != 1.0 and team == teams[0]:
                if row.action == "replace":
                    group.nodes_replaced += 1
                else:
                    group.nodes_removed += 1
    buckets: dict[str, dict[datetime, float]] = defaultdict(lambda: defaultdict(float))
    for row in usage:
        total.add_usage(row)
        by_pool.setdefault(row.nodepool, Totals(row.nodepool)).add_usage(row)
        teams = row.teams or (NO_TEAM,)
        for team in teams:
            by_team.setdefault(team, Totals(team)).add_usage(row, share=1.0 / len(teams))
        # $/h per clock hour: a sample spanning several hours adds to each in proportion.
        start, end = row.time, row.time + timedelta(hours=row.hours)
        hour = start.replace(minute=0, second=0, microsecond=0)
        while hour < end:
            overlap = (min(end, hour + timedelta(hours=1)) - max(start, hour)).total_seconds() / 3600
            buckets[row.nodepool][hour] += row.price_per_hour * overlap
            hour += timedelta(hours=1)
    churn = Churn(
        pods_evicted=sum(a.pods_moved for a in actions),
        nodes_replaced=sum(1 for a in actions if a.action == "replace"),
        nodes_removed=sum(1 for a in actions if a.action == "delete"),
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
        cost_per_hour={p: sorted(hours.items()) for p, hours in sorted(buckets.items())},
        actions=actions,
    )


# ---- renderings ------------------------------------------------------------------------------------

TOTAL_HEADERS = (
    "name",
    "nodes_removed",
    "nodes_replaced",
    "pods_evicted",
    "savings_per_hour",
    "realized_savings",
    "run_rate_monthly",
    "cost",
    "idle_cost",
    "gpu_idle_hours",
)


def _totals_row(t: Totals) -> list[Any]:
    return [
        t.name,
        t.nodes_removed,
        t.nodes_replaced,
        round(t.pods_evicted, 2),
        round(t.savings_per_hour, 4),
        round(t.realized_savings, 2),
        round(t.run_rate_monthly, 2),
        round(t.cost, 2),
        round(t.idle_cost, 2),
        round(t.gpu_idle_hours, 2),
    ]


def to_table(report: ScaleDownReport) -> str:
    scope = f"pool {report.pool}" if report.pool else "all pools"
    head = (
        f"Scale-down report, {scope}, {report.since:%Y-%m-%d %H:%M} to {report.now:%Y-%m-%d %H:%M} UTC\n"
        f"Realized savings ${report.total.realized_savings:,.2f} so far; run-rate "
        f"${report.total.savings_per_hour:,.2f}/h (${report.total.run_rate_monthly:,.2f} per 730 h month, "
        "an estimate, not added to the realized figure)\n"
        f"Idle cost ${report.total.idle_cost:,.2f} of ${report.total.cost:,.2f} paid; "
        f"GPU idle {report.total.gpu_idle_hours:,.1f} GPU-hours"
    )
    churn = report.churn
    sections = [
        head,
        table(TOTAL_HEADERS, [_totals_row(t) for t in report.pools], title="By pool"),
        table(TOTAL_HEADERS, [_totals_row(t) for t in report.teams], title="By team"),
        table(TOTAL_HEADERS, [_totals_row(t) for t in report.reasons], title="By reason"),
        table(
            ("pods_evicted", "nodes_removed", "nodes_replaced", "replacements_disrupted_within_1h"),
            [
                [
                    churn.pods_evicted,
                    churn.nodes_removed,
                    churn.nodes_replaced,
                    churn.replacements_disrupted_within_hour,
                ]
            ],
            title="Churn",
        ),
        table(
            ("kind", "pool", "evaluations", "nodes", "detail"),
            [[b.kind, b.nodepool, b.evaluations, b.nodes, b.detail] for b in report.blockers],
            title="Top blockers",
        ),
    ]
    return "\n\n".join(sections) + "\n"


def to_csv(report: ScaleDownReport) -> str:
    """One row per group, with the group's section first: total, pool, team, reason, blocker."""
    headers = ("section", *TOTAL_HEADERS, "count", "detail")
    rows: list[list[Any]] = [["total", *_totals_row(report.total), "", ""]]
    for section, groups in (("pool", report.pools), ("team", report.teams), ("reason", report.reasons)):
        rows += [[section, *_totals_row(t), "", ""] for t in groups]
    blanks = [""] * (len(TOTAL_HEADERS) - 1)
    rows += [
        ["blocker", b.kind, *blanks, b.evaluations, f"{b.nodepool}: {b.detail}"] for b in report.blockers
    ]
    churn = report.churn
    rows.append(
        ["churn", "replacements_disrupted_within_1h", *blanks, churn.replacements_disrupted_within_hour, ""]
    )
    return csv_text(headers, rows)


def to_dict(report: ScaleDownReport) -> dict[str, Any]:
    def totals(t: Totals) -> dict[str, Any]:
        return dict(zip(TOTAL_HEADERS, _totals_row(t), strict=True))

    return {
        "since": report.since.isoformat(),
        "now": report.now.isoformat(),
        "pool": report.pool,
        "total": totals(report.total),
        "pools": [totals(t) for t in report.pools],
        "teams": [totals(t) for t in report.teams],
        "reasons": [totals(t) for t in report.reasons],
        "churn": asdict(report.churn),
        "topBlockers": [asdict(b) for b in report.blockers],
        "costPerHour": {
            pool: [{"time": t.isoformat(), "dollars": round(v, 4)} for t, v in points]
            for pool, points in report.cost_per_hour.items()
        },
        "actions": [
            {
                "time": a.time.isoformat(),
                "action": a.action,
                "node": a.node,
                "nodePool": a.nodepool,
                "teams": list(a.teams),
                "reason": a.reason,
                "method": a.method,
                "instanceType": a.instance_type,
                "capacityType": a.capacity_type,
                "zone": a.zone,
                "pricePerHour": a.price_per_hour,
                "replacement": a.replacement_type,
                "replacementPricePerHour": a.replacement_price_per_hour,
                "savingsPerHour": round(a.savings_per_hour, 6),
                "pods": list(a.pods),
                "realizedSavings": round(realized(a, now=report.now), 4),
            }
            for a in report.actions
        ],
    }


def to_json(report: ScaleDownReport) -> str:
    return json.dumps(to_dict(report), indent=2) + "\n"


_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.kpi{display:inline-block;margin-right:2em}.kpi b{display:block;font-size:1.4em}
"""


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    from provisioner.finops.reports.text import cell

    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="n">{escape(cell(v))}</td>'
            if isinstance(v, int | float)
            else f"<td>{escape(cell(v))}</td>"
            for v in row
        )
        body.append(f"<tr>{cells}</tr>")
    if not rows:
        body.append(f'<tr><td colspan="{len(headers)}">none</td></tr>')
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def to_html(report: ScaleDownReport) -> str:
    """One self-contained page: inline CSS and SVG charts, no scripts, no external files."""
    start = report.since.timestamp()
    series = {
        pool: [((t.timestamp() - start) / 3600, v) for t, v in points]
        for pool, points in report.cost_per_hour.items()
    }
    span_hours = max(1.0, (report.now - report.since).total_seconds() / 3600)
    ticks = [
        (span_hours * i / 4, (report.since + timedelta(hours=span_hours * i / 4)).strftime("%m-%d %H:%M"))
        for i in range(5)
    ]
    cost_chart = svg.line_chart(series, title="Cost per hour by pool ($/h)", x_labels=ticks, y_unit=" $/h")
    reason_chart = svg.bar_chart(
        [(t.name, t.savings_per_hour) for t in report.reasons], title="Savings by reason ($/h)", unit=" $/h"
    )
    total = report.total
    scope = f"pool {escape(report.pool)}" if report.pool else "all pools"
    kpis = "".join(
        f'<div class="kpi"><b>{escape(value)}</b>{escape(label)}</div>'
        for label, value in (
            ("realized savings", f"${total.realized_savings:,.2f}"),
            ("saved per hour", f"${total.savings_per_hour:,.2f}"),
            ("run-rate per month (estimate)", f"${total.run_rate_monthly:,.2f}"),
            ("idle cost", f"${total.idle_cost:,.2f}"),
            ("GPU idle hours", f"{total.gpu_idle_hours:,.1f}"),
        )
    )
    churn = report.churn
    actions = [
        [
            f"{a.time:%Y-%m-%d %H:%M}",
            a.action,
            a.node,
            a.nodepool,
            ",".join(a.teams) or "-",
            a.reason,
            a.instance_type,
            a.capacity_type,
            round(a.price_per_hour, 4),
            a.replacement_type or "-",
            round(a.savings_per_hour, 4),
            a.pods_moved,
        ]
        for a in report.actions
    ]
    body = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Scale-down report</title><style>{_STYLE}</style></head>
<body>
<h1>Scale-down report, {scope}</h1>
<p>{report.since:%Y-%m-%d %H:%M} to {report.now:%Y-%m-%d %H:%M} UTC. Realized savings count each action's
$/h from the moment it happened; the monthly run-rate is an estimate (730 h) and is never added to them.</p>
<div>{kpis}</div>
<h2>Cost per hour</h2>{cost_chart}
<h2>Savings by reason</h2>{reason_chart}
<h2>By pool</h2>{_html_table(TOTAL_HEADERS, [_totals_row(t) for t in report.pools])}
<h2>By team</h2>{_html_table(TOTAL_HEADERS, [_totals_row(t) for t in report.teams])}
<h2>Churn</h2>{
        _html_table(
            ("pods evicted", "nodes removed", "nodes replaced", "replacements disrupted within 1 h"),
            [
                [
                    churn.pods_evicted,
                    churn.nodes_removed,
                    churn.nodes_replaced,
                    churn.replacements_disrupted_within_hour,
                ]
            ],
        )
    }
<h2>Top blockers</h2>{
        _html_table(
            ("kind", "pool", "evaluations", "nodes", "detail"),
            [[b.kind, b.nodepool, b.evaluations, b.nodes, b.detail] for b in report.blockers],
        )
    }
<h2>Actions</h2>{
        _html_table(
            (
                "time",
                "action",
                "node",
                "pool",
                "teams",
                "reason",
                "type",
                "capacity",
                "$/h",
                "replacement",
                "saved $/h",
                "pods",
            ),
            actions,
        )
    }
</body></html>
"""
    return body


RENDERERS = {"table": to_table, "csv": to_csv, "json": to_json, "html": to_html}
