"""Report windows: the part of each usage or reservation row that falls inside [since, now).

A row covers `hours` from `time`; a window that starts or ends inside it keeps only the hours inside,
at the same $/h and counts, so any split of a period into windows adds up to the whole period (the
23:00 hour costs the same in a day's report and in a report of that hour alone).

Pure: rows and times in, rows out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TypeVar

from provisioner.finops.rows import ReservationRow, UsageRow

Row = TypeVar("Row", UsageRow, ReservationRow)


def clip(rows: Iterable[Row], *, since: datetime, now: datetime) -> list[Row]:
    """Each row's part inside [since, now); rows wholly outside are left out, and a row of no hours is
    kept only when its moment is inside (a sample at a window's start)."""
    out = []
    for row in rows:
        end = row.time + timedelta(hours=row.hours)
        if row.hours <= 0:
            if since <= row.time < now:
                out.append(row)
            continue
        start, stop = max(row.time, since), min(end, now)
        if stop <= start:
            continue
        if start == row.time and stop == end:
            out.append(row)
        else:
            out.append(replace(row, time=start, hours=(stop - start).total_seconds() / 3600))
    return out
