"""Disruption budgets: how many nodes of each pool may be disrupted now, per reason.

A budget applies to a reason when its `reasons` list is empty or names it, and is active when it has no
schedule or `now` falls within `duration` after its last cron tick (UTC). The most restrictive active
budget that applies wins; with none, the reason is unlimited (as in Karpenter). Nodes already being
disrupted count against every reason, and so do the nodes this plan has taken so far.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from croniter import croniter

from provisioner.api import NodePool, durations
from provisioner.api.nodepool import Budget, DisruptionReason
from provisioner.disruption.plan_time import PlanTime, aware


def budget_active(budget: Budget, now: datetime | PlanTime) -> bool:
    """Whether the budget's cron window contains `now` (always, without a schedule)."""
    if budget.schedule is None or budget.duration is None:
        return True
    clock = now if isinstance(now, PlanTime) else PlanTime(now)
    length = durations.parse_duration(budget.duration) or timedelta(0)
    moment = clock.now
    # Start just after `now` so a tick at exactly `now` counts as the window opening.
    last_tick = aware(croniter(budget.schedule, moment + timedelta(microseconds=1)).get_prev(datetime))
    # The answer holds from the last tick until the next one (or the window's end, whichever is first).
    next_tick = aware(croniter(budget.schedule, last_tick).get_next(datetime))
    clock.reached(last_tick)
    clock.reached(next_tick)
    return not clock.reached(last_tick + length)


def limit_for(
    pool: NodePool, reason: DisruptionReason, *, total: int, now: datetime | PlanTime
) -> tuple[int | None, str]:
    """The node count the pool's budgets allow for a reason (None: unlimited) and the budget that set it."""
    best: int | None = None
    which = ""
    for index, budget in enumerate(pool.spec.disruption.budgets):
        if budget.reasons and reason not in budget.reasons:
            continue
        if not budget_active(budget, now):
            continue
        allowed = budget.max_nodes(total)
        if best is None or allowed < best:
            best = allowed
            window = f", schedule {budget.schedule!r} for {budget.duration}" if budget.schedule else ""
            which = f"budget #{index} of pool {pool.name} (nodes {budget.nodes}{window})"
    return best, which


class BudgetTracker:
    """Per-pool room left during one plan."""

    def __init__(
        self,
        pools: Iterable[NodePool],
        *,
        totals: dict[str, int],
        disrupting: dict[str, int],
        clock: PlanTime,
    ) -> None:
        self._pools = {p.name: p for p in pools}
        self._totals = totals
        self.used: dict[str, int] = dict(disrupting)
        """Nodes of each pool being disrupted: those already in progress plus the ones planned here."""
        self._clock = clock
        self._limits: dict[tuple[str, DisruptionReason], tuple[int | None, str]] = {}

    def _limit(self, pool: str, reason: DisruptionReason) -> tuple[int | None, str]:
        key = (pool, reason)
        if key not in self._limits:
            self._limits[key] = limit_for(
                self._pools[pool], reason, total=self._totals.get(pool, 0), now=self._clock
            )
        return self._limits[key]

    def room(self, pool: str, reason: DisruptionReason) -> int | None:
        """Nodes that may still be disrupted for the reason (None: unlimited)."""
        limit, _ = self._limit(pool, reason)
        if limit is None:
            return None
        return max(0, limit - self.used.get(pool, 0))

    def blocker(self, pool: str, reason: DisruptionReason, count: int = 1) -> str | None:
        room = self.room(pool, reason)
        if room is None or room >= count:
            return None
        limit, which = self._limit(pool, reason)
        return (
            f"{which} allows {limit} node(s) disrupted for {reason.value}; "
            f"{self.used.get(pool, 0)} already disrupting"
        )

    def take(self, pool: str, count: int = 1) -> None:
        self.used[pool] = self.used.get(pool, 0) + count
