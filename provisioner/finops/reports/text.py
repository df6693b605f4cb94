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


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    width: int | None = None,
) -> str:
    """An aligned text table; numbers right-aligned. With `width` (the terminal's), the widest text
    columns are cut (ending in "…") until a line fits, numbers never; when even that cannot fit, each row
    is printed as a block of "Header: value" lines instead."""
    texts = [[cell(v) for v in row] for row in rows]
    headers = list(headers)
    widths = [len(h) for h in headers]
    for row in texts:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], len(value))
    numeric = [
        all(isinstance(row[i], int | float) and not isinstance(row[i], bool) for row in rows) and bool(rows)
        for i in range(len(headers))
    ]
    if width is not None:
        room = width - 2 * (len(widths) - 1)
        _fit(widths, numeric, room)
        if sum(widths) > room:
            return _records(headers, texts, title=title, width=width)
        texts = [[_cut(v, w) for v, w in zip(row, widths, strict=True)] for row in texts]
        headers = [_cut(h, w) for h, w in zip(headers, widths, strict=True)]

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


MIN_COLUMN = 6


def _records(headers: Sequence[str], texts: Sequence[Sequence[str]], *, title: str | None, width: int) -> str:
    """One block per row, a "Header: value" line per column (for terminals too narrow for the table)."""
    pad = max(len(h) for h in headers)
    out = [title] if title else []
    for row in texts:
        out.append("")
        out.extend(
            f"{h.rjust(pad)}: {_cut(v, max(MIN_COLUMN, width - pad - 2))}"
            for h, v in zip(headers, row, strict=True)
        )
    if not texts:
        out.append("(none)")
    return "\n".join(out)


def _fit(widths: list[int], numeric: list[bool], room: int) -> None:
    """Narrow the widest text column, one character at a time, until the columns fit `room`."""
    while sum(widths) > room:
        cuttable = [i for i, w in enumerate(widths) if not numeric[i] and w > MIN_COLUMN]
        if not cuttable:
            return
        widest = max(cuttable, key=lambda i: widths[i])
        widths[widest] -= 1


def _cut(value: str, width: int) -> str:
    return value if len(value) <= width else value[: max(0, width - 1)] + "…"


def plural(n: int | float, word: str, many: str | None = None) -> str:
    """`1 node`, `2 nodes` (`many` for irregular plurals)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def camel(key: str) -> str:
    """A snake_case CSV column as its JSON key: `price_per_hour` -> `pricePerHour`."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def records(keys: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Rows as JSON objects keyed by the camelCase form of each CSV column."""
    return [{camel(k): v for k, v in zip(keys, row, strict=True)} for row in rows]


def dump(data: Any, fmt: str) -> str:
    """Plain data as `json` (indented) or `yaml` text, ending in a newline."""
    if fmt == "yaml":
        import yaml

        return str(yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True))
    import json

    # Written piece by piece into one buffer: `json.dumps` with an indent joins a list of every piece at
    # the end (millions for a 100,000-pod run's document, some hundred MiB at the run's peak).
    buffer = io.StringIO()
    json.dump(data, buffer, indent=2)
    buffer.write("\n")
    return buffer.getvalue()


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


def largest_remainder(values: Sequence[float], digits: int = 2) -> list[float]:
    """`values` rounded to `digits` so that they add up to their sum rounded the same way: each is cut
    down to the unit, and the units still missing go to the largest remainders (Hamilton's method)."""
    scale = 10**digits
    target = round(sum(values) * scale)
    floors = [int(v * scale // 1) for v in values]
    missing = target - sum(floors)
    order = sorted(range(len(values)), key=lambda i: (-(values[i] * scale - floors[i]), i))
    for i in order[: max(0, missing)]:
        floors[i] += 1
    return [f / scale for f in floors]
