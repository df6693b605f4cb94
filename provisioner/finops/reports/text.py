"""Plain-text tables and CSV, shared by every report."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None) -> str:
    """An aligned text table; numbers right-aligned."""
    texts = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in texts:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], len(value))
    numeric = [
        all(isinstance(row[i], int | float) and not isinstance(row[i], bool) for row in rows) and bool(rows)
        for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if numeric[i] else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    out = []
    if title:
        out.append(title)
    out.append(line(list(headers)))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(row) for row in texts)
    if not rows:
        out.append("(none)")
    return "\n".join(out)


def csv_text(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(headers)
    for row in rows:
        writer.writerow(
            [
                ",".join(str(v) for v in value)
                if isinstance(value, tuple | list)
                else ("" if value is None else value)
                for value in row
            ]
        )
    return buffer.getvalue()
