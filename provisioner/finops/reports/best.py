"""What a simulated run paid beside the best possible: "paid $X, best possible $Y, realized Z% of the
possible saving".

- *Paid* is what the run's nodes cost over the intervals whose optimum HiGHS proved (the usage rows'
  part inside each interval), *best possible* the optimum's $/h over the same intervals
  (`provisioner.finops.rows.BestRow`, written by `provisioner simulate --best-possible`).
- *Realized* is disruption's realized savings (the scale-down report's); without them the run would have
  paid paid + realized, so the *possible saving* is paid + realized - best, and Z is realized over it.
Pure: rows in, numbers and words out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from provisioner.finops import window
from provisioner.finops.rows import BestRow, UsageRow


@dataclass(frozen=True, slots=True)
class Comparison:
    paid: float
    best: float
    realized: float
    hours: float
    """Hours of the run with a best possible cost."""
    solved_hours: float
    """Of those, the hours whose optimum HiGHS proved (paid and best cover these)."""

    @property
    def possible_saving(self) -> float:
        return self.paid + self.realized - self.best

    @property
    def realized_share(self) -> float | None:
        """Realized savings over the possible saving (None when nothing could be saved)."""
        possible = self.possible_saving
        return self.realized / possible if possible > 1e-9 else None

    def sentence(self) -> str:
        share = self.realized_share
        text = f"paid ${self.paid:,.2f}, best possible ${self.best:,.2f}, " + (
            f"realized {share:.0%} of the possible saving" if share is not None else "nothing more to save"
        )
        if self.solved_hours < self.hours - 1e-9:
            text += f" (over the {self.solved_hours:,.1f} h of {self.hours:,.1f} h that HiGHS solved)"
        return text

    def to_dict(self) -> dict[str, Any]:
        share = self.realized_share
        return {
            "paid": round(self.paid, 4),
            "bestPossible": round(self.best, 4),
            "realizedSavings": round(self.realized, 4),
            "possibleSaving": round(self.possible_saving, 4),
            "realizedShare": round(share, 4) if share is not None else None,
            "hours": round(self.hours, 4),
            "solvedHours": round(self.solved_hours, 4),
        }


def per_hour(best: Sequence[BestRow], *, since: datetime, now: datetime) -> list[tuple[datetime, float]]:
    """The best possible $ in each clock hour of [since, now) its rows cover (proved optima only)."""
    hours: dict[datetime, float] = {}
    for r in best:
        if r.cost_per_hour is None or r.hours <= 0:
            continue
        start, end = max(r.time, since), min(r.time + timedelta(hours=r.hours), now)
        hour = start.replace(minute=0, second=0, microsecond=0)
        while hour < end:
            overlap = (min(end, hour + timedelta(hours=1)) - max(start, hour)) / timedelta(hours=1)
            if overlap > 0:
                hours[hour] = hours.get(hour, 0.0) + r.cost_per_hour * overlap
            hour += timedelta(hours=1)
    return sorted(hours.items())


def compare(
    best: Sequence[BestRow], usage: Sequence[UsageRow], *, realized: float, since: datetime, now: datetime
) -> Comparison | None:
    """The comparison over [since, now); None when the window has no best possible rows."""
    rows = [r for r in best if r.hours > 0 and r.time < now and r.time + timedelta(hours=r.hours) > since]
    if not rows:
        return None
    paid = cheapest = hours = solved = 0.0
    for r in rows:
        start, end = max(r.time, since), min(r.time + timedelta(hours=r.hours), now)
        span = (end - start) / timedelta(hours=1)
        hours += span
        if r.cost_per_hour is None:
            continue
        solved += span
        cheapest += r.cost_per_hour * span
        paid += sum(u.cost for u in window.clip(usage, since=start, now=end))
    return Comparison(paid=paid, best=cheapest, realized=realized, hours=hours, solved_hours=solved)
