"""Small inline SVG charts (lines and bars) for the self-contained HTML reports: no JS, no CSS files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    title: str,
    x_labels: Sequence[tuple[float, str]] = (),
    y_unit: str = "",
    width: int = 720,
    height: int = 260,
) -> str:
    """One polyline per series over shared axes; x and y are plain numbers."""
    left, right, top, bottom = 60, 150, 30, 40
    points = [p for s in series.values() for p in s]
    x_min = min((p[0] for p in points), default=0.0)
    x_max = max((p[0] for p in points), default=1.0)
    y_max = max((p[1] for p in points), default=1.0) or 1.0
    if x_max == x_min:
        x_max = x_min + 1

    def sx(x: float) -> float:
        return left + (x - x_min) / (x_max - x_min) * (width - left - right)

    def sy(y: float) -> float:
        return height - bottom - y / y_max * (height - top - bottom)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{left}" y="18" font-size="14" font-weight="bold">{escape(title)}</text>',
        f'<line x1="{left}" y1="{sy(0):.1f}" x2="{width - right}" y2="{sy(0):.1f}" stroke="#444"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{sy(0):.1f}" stroke="#444"/>',
        f'<text x="{left - 6}" y="{top + 4}" font-size="11" text-anchor="end">{y_max:,.2f}{escape(y_unit)}</text>',
        f'<text x="{left - 6}" y="{sy(0):.1f}" font-size="11" text-anchor="end">0</text>',
    ]
    for x, label in x_labels:
        parts.append(
            f'<text x="{sx(x):.1f}" y="{height - bottom + 16}" font-size="10" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    if not points:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no data</text>')
    for index, (name, values) in enumerate(sorted(series.items())):
        color = PALETTE[index % len(PALETTE)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(values))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>')
        ly = top + 14 * index
        parts.append(f'<rect x="{width - right + 10}" y="{ly}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{width - right + 25}" y="{ly + 9}" font-size="11">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(
    bars: Sequence[tuple[str, float]],
    *,
    title: str,
    unit: str = "",
    width: int = 720,
    bar_height: int = 22,
) -> str:
    """Horizontal bars, one per label."""
    left, top = 180, 30
    height = top + bar_height * max(1, len(bars)) + 20
    peak = max((abs(v) for _, v in bars), default=1.0) or 1.0
    span = width - left - 120
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="10" y="18" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    if not bars:
        parts.append(f'<text x="{left}" y="{top + 14}">no data</text>')
    for index, (label, value) in enumerate(bars):
        y = top + index * bar_height
        w = max(1.0, abs(value) / peak * span)
        color = PALETTE[index % len(PALETTE)]
        parts.append(
            f'<text x="{left - 8}" y="{y + 15}" font-size="12" text-anchor="end">{escape(label)}</text>'
        )
        parts.append(
            f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{bar_height - 6}" fill="{color}"/>'
        )
        parts.append(
            f'<text x="{left + w + 6:.1f}" y="{y + 15}" font-size="12">{value:,.2f}{escape(unit)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
