"""Charts for the HTML reports, drawn by Altair (Vega-Lite) and rendered to SVG at build time by
vl-convert: the page carries the SVG inline, so it opens offline with no script and no CDN.

Pure: data in, SVG text out; nothing is read from the clock, the network or the disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

import altair as alt
import vl_convert

WIDTH = 1000


def _svg(chart: alt.Chart) -> str:
    svg = vl_convert.vegalite_to_svg(chart.to_dict())
    # The XML prolog is not allowed inside an HTML page.
    return svg[svg.index("<svg") :]


def cost_lines(
    series: Mapping[str, Sequence[tuple[datetime, float]]], *, title: str, legend: str = "Pool"
) -> str:
    """$ per hour, one line per pool. Every hour is a point (zero when the pool had no node), so a pool
    that scales to zero draws down to 0, and the axis starts at 0 and never goes below it."""
    rows = [
        {"hour": t.strftime("%Y-%m-%dT%H:%M:%SZ"), "pool": pool, "dollars": max(0.0, round(v, 4))}
        for pool, points in sorted(series.items())
        for t, v in points
    ]
    if not rows:
        return "<p>No usage samples in this window.</p>"
    chart = (
        alt.Chart(alt.Data(values=rows), title=title, width=WIDTH, height=260)
        .mark_line(interpolate="step-after", point=False)
        .encode(
            x=alt.X("hour:T", title="Hour (UTC)", axis=alt.Axis(format="%m-%d %H:%M")),
            y=alt.Y(
                "dollars:Q", title="$ paid in the hour", scale=alt.Scale(domainMin=0, zero=True, clamp=True)
            ),
            color=alt.Color("pool:N", title=legend),
        )
    )
    return _svg(chart)


def bars(values: Sequence[tuple[str, float]], *, title: str, axis: str) -> str:
    """Horizontal bars, one per label, largest first."""
    rows = [{"label": label, "value": round(v, 4)} for label, v in values]
    if not rows:
        return "<p>Nothing to chart in this window.</p>"
    chart = (
        alt.Chart(alt.Data(values=rows), title=title, width=WIDTH - 200, height=max(40, 26 * len(rows)))
        .mark_bar()
        .encode(
            y=alt.Y("label:N", title=None, sort="-x"),
            x=alt.X("value:Q", title=axis),
            tooltip=["label:N", "value:Q"],
        )
    )
    return _svg(chart)


def used_idle_areas(points: Sequence[tuple[str, datetime, float, float]], *, title: str, axis: str) -> str:
    """Per clock hour, used stacked under idle (steps, one hour wide), one row per name (a reservation):
    `points` are (name, hour, used, idle)."""
    if not points:
        return "<p>Nothing to chart in this window.</p>"
    # A step is drawn up to the next point: close each row with a zero the hour after its last.
    last: dict[str, datetime] = {}
    for name, t, _, _ in points:
        last[name] = max(t, last.get(name, t))
    closed = [*points, *((name, t + timedelta(hours=1), 0.0, 0.0) for name, t in last.items())]
    rows = [
        {"name": name, "hour": t.strftime("%Y-%m-%dT%H:%M:%SZ"), "state": state, "value": round(v, 4)}
        for name, t, used, idle in closed
        for state, v in (("used", used), ("idle", idle))
    ]
    chart = (
        alt.Chart(alt.Data(values=rows), width=WIDTH - 100, height=110)
        .mark_area(interpolate="step-after")
        .encode(
            x=alt.X("hour:T", title="Hour (UTC)", axis=alt.Axis(format="%m-%d %H:%M")),
            y=alt.Y("sum(value):Q", title=axis),
            color=alt.Color(
                "state:N",
                title=None,
                scale=alt.Scale(domain=["used", "idle"], range=["#4c78a8", "#e45756"]),
            ),
            order=alt.Order("state:N", sort="descending"),
            row=alt.Row("name:N", title=None),
        )
        .properties(title=title)
    )
    return _svg(chart)
