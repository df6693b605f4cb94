"""The HTML reports, for a person: one self-contained page (inline CSS, charts as inline SVG drawn at
build time by `charts`), no script, nothing fetched when it opens.

The headline gives the total paid, the realized savings and the run-rate (and, with reservations, what
they cost, their idle part and idle reserved GPU-hours); the tables have headers in
words; each action shows its node before and after ($/h, type, capacity type) and its reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from provisioner.finops.reports import charts
from provisioner.finops.reports import reservations as rv
from provisioner.finops.reports.text import cell

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222;max-width:1300px}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.8em}
p.note{color:#555;font-size:13px;max-width:900px}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.kpis{display:flex;flex-wrap:wrap;gap:1em;margin:1em 0}
.kpi{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;min-width:12em}
.kpi b{display:block;font-size:1.35em}.kpi span{color:#555;font-size:13px}
"""


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="n">{escape(cell(v))}</td>'
            if isinstance(v, int | float) and not isinstance(v, bool)
            else f"<td>{escape(cell(v))}</td>"
            for v in row
        )
        body.append(f"<tr>{cells}</tr>")
    if not rows:
        body.append(f'<tr><td colspan="{len(headers)}">none</td></tr>')
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def kpis(figures: Sequence[tuple[str, str]]) -> str:
    return (
        '<div class="kpis">'
        + "".join(
            f'<div class="kpi"><b>{escape(value)}</b><span>{escape(label)}</span></div>'
            for label, value in figures
        )
        + "</div>"
    )


def page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def _best_section(report: Any) -> list[str]:
    """What the whole fleet paid per clock hour beside the best possible (`simulate --best-possible`)."""
    paid: dict[Any, float] = {}
    for points in report.cost_per_hour.values():
        for hour, dollars in points:
            paid[hour] = paid.get(hour, 0.0) + dollars
    return [
        "<h2>Paid beside the best possible</h2>",
        f'<p class="note">{escape(report.best.sentence())}: the best possible is an exact optimum packing of '
        "the pods wanting capacity, interval by interval (HiGHS), a floor no run goes under.</p>",
        charts.cost_lines(
            {"paid": sorted(paid.items()), "best possible": report.best_per_hour},
            title="$ per hour: paid and best possible",
            legend="Fleet",
        ),
    ]


def scale_down_page(
    report: Any,
    *,
    headline: Sequence[tuple[str, str]],
    totals: tuple[Sequence[str], Mapping[str, Sequence[Sequence[Any]]]],
    actions: tuple[Sequence[str], Sequence[Sequence[Any]]],
) -> str:
    """The scale-down report (`scale_down.ScaleDownReport`) as a page: `scale_down_formats.to_html` gives its
    headline figures, its totals (headers, rows by pool, team and reason) and its actions (headers, rows)
    as the text reports show them."""
    scope = f"pool {report.pool}" if report.pool else "all pools"
    churn = report.churn
    parts = [
        f"<h1>Scale-down report, {escape(scope)}</h1>",
        f'<p class="note">{report.since:%Y-%m-%d %H:%M} to {report.now:%Y-%m-%d %H:%M} UTC. '
        "Paid is what the nodes cost from launch to deletion. Realized savings count each action's saved $/h "
        "(against the replacements really launched) from the moment it happened, less the churn charged back; "
        "the run-rate is an estimate of a 730 h month and is never added to them. Pods nothing recreates "
        "are reported as workload evicted, never as a saving. Expiration, drift and a Capacity Block's end "
        "are not savings: their change to the fleet's $/h is shown apart.</p>",
        kpis(headline),
        "<h2>Cost per hour by pool</h2>",
        charts.cost_lines(report.cost_per_hour, title="$ paid per hour, by pool"),
        *(_best_section(report) if report.best_per_hour else ()),
        "<h2>Saved per hour by reason</h2>",
        charts.bars(
            [(t.name, t.savings_per_hour) for t in report.reasons], title="Saved $/h by reason", axis="$/h"
        ),
        *(reservations_section(report.reservations) if report.reservations is not None else ()),
        "<h2>By pool</h2>",
        table(totals[0], totals[1]["pool"]),
        "<h2>By team</h2>",
        table(totals[0], totals[1]["team"]),
        "<h2>By reason</h2>",
        table(totals[0], totals[1]["reason"]),
        "<h2>Actions, before and after</h2>",
        table(*actions),
        "<h2>Churn</h2>",
        table(
            (
                "Pods moved",
                "Bare pods evicted",
                "Nodes removed",
                "Nodes replaced",
                "Nodes launched again for moved pods",
                "Churn charged back $",
                "Replacements disrupted within 1 h",
            ),
            [churn.cells()],
        ),
        "<h2>Top blockers</h2>",
        table(
            ("Blocker", "Pool", "Evaluations", "Nodes", "Detail"),
            [[b.kind, b.nodepool, b.evaluations, b.nodes, b.detail] for b in report.blockers],
        ),
    ]
    return page("Scale-down report", "\n".join(parts))


def reservations_section(report: Any) -> list[str]:
    """Reservation utilization (`reservations.ReservationReport`): the table and used/idle per hour."""
    return [
        "<h2>Reserved capacity</h2>",
        '<p class="note">Reservations are paid for every hour they exist, used or not; their nodes cost '
        "$0/h more, so a node moved from on-demand into a reservation with room saves its whole on-demand "
        "price. Used counts each running node by what its pods request (GPUs on a GPU type); idle is the "
        "rest, empty slots included.</p>",
        table(rv.HEADERS, [rv.values(u) for u in report.reservations]),
        charts.used_idle_areas(
            [(h.usage.name, h.hour, h.usage.used_hours, h.usage.idle_hours) for h in report.hours],
            title="Reserved instance-hours per hour, used and idle",
            axis="instance-hours",
        ),
    ]
