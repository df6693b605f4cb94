"""The plan's `now`, read through comparisons that note how long their answers hold.

Every rule of the planner that depends on time asks one question: has this moment been reached
(`consolidateAfter` passed, `expireAfter` passed, a do-not-disrupt duration lapsed, a budget window
opened or closed, a Capacity Block within its lead)? `PlanTime.reached` answers it and narrows the span
of moments, around `now`, at which every answer given so far would be the same. A plan made at `now` is
therefore the plan of any moment its PlanTime `holds_at`, given the same cluster (`memory` relies on it).
Not a clock (that is `provisioner.clock.Clock`, which the controllers read): a plan's fixed moment.

A rule that compared `now` itself, without `reached`, would make that span a lie: time is read only here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload


@overload
def aware(moment: datetime) -> datetime: ...
@overload
def aware(moment: None) -> None: ...
def aware(moment: datetime | None) -> datetime | None:
    """The moment with a time zone (a naive one is taken as UTC)."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


class PlanTime:
    """`now` for one plan (fixed: it never moves), and the span of moments at which the answers given so far hold."""

    __slots__ = ("_now", "_since", "_until")

    def __init__(self, now: datetime) -> None:
        self._now = aware(now)
        self._since: datetime | None = None
        """The latest moment reached so far: at an earlier moment some answer would be "not yet"."""
        self._until: datetime | None = None
        """The earliest moment not reached yet: from it on some answer would be "reached"."""

    @property
    def now(self) -> datetime:
        """The moment of the plan. Read it only to stamp the plan or to find a moment (a cron tick) that is
        then compared through `reached`; never compare it directly."""
        return self._now

    def reached(self, moment: datetime) -> bool:
        """Whether `moment` is now or past."""
        if moment <= self._now:
            if self._since is None or moment > self._since:
                self._since = moment
            return True
        if self._until is None or moment < self._until:
            self._until = moment
        return False

    def holds_at(self, moment: datetime) -> bool:
        """Whether every answer given so far would be the same at `moment`."""
        since, until = self._since, self._until
        return (since is None or since <= moment) and (until is None or moment < until)
