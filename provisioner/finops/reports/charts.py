"""Charts for the HTML reports, drawn by Altair (Vega-Lite) and rendered to SVG at build time by
vl-convert: the page carries the SVG inline, so it opens offline with no script and no CDN.

Pure: data in, SVG text out; nothing is read from the clock, the network or the disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import altair as alt
import vl_convert

WIDTH = 1000


def _svg(chart: alt.Chart) -> str:
    svg = vl_convert.vegalite_to_svg(chart.to_dict())
    # The XML prolog is not allowed inside an HTML page.
    return svg[svg.index("<svg") :]


def cost_lines(series: Mapping[str, Sequence[tuple[datetime, float]]], *, title: str) -> str:
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
            color=alt.Color("pool:N", title="Pool"),
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
