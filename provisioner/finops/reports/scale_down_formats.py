"""The scale-down report (`scale_down.ScaleDownReport`) as people and tools read it: the headline
figures, a table per group, CSV, JSON, and the HTML page (`html` draws it from the same rows), with
`RENDERERS` by format name. Every format shows the figures `scale_down.build` worked out, rounded the same
way; nothing is computed here. Pure.
"""

from __future__ import annotations

import json
from typing import Any

from provisioner.finops.reports import html
from provisioner.finops.reports import reservations as reserved
from provisioner.finops.reports.scale_down import ActionView, ScaleDownReport, Totals
from provisioner.finops.reports.text import csv_text, plural, table

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
            [churn.cells()],
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
