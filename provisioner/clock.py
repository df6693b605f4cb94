"""Time, as the controllers see it: the `Clock` protocol, the real clock, and a virtual clock that the
simulator and the tests advance by hand.

Controllers never call `datetime.now()` or `time.sleep()` themselves: they take a Clock, so the same code
runs in production (RealClock) and inside `provisioner simulate` (VirtualClock) where a day passes in
seconds.
"""

from __future__ import annotations

import functools
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Where `now` comes from and how to wait."""

    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait this long (virtual clocks return at once, or when advanced)."""
        ...


class RealClock:
    """The machine's clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class VirtualClock:
    """A clock that moves only when told to. `sleep` advances it (one thread driving the simulation), so a
    loop written for the real clock runs unchanged and instantly."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("VirtualClock needs a timezone-aware start time")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta | float) -> datetime:
        """Move time forward by a timedelta or a number of seconds; returns the new now."""
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        if step < timedelta(0):
            raise ValueError("a clock cannot go backwards")
        with self._lock:
            self._now += step
            return self._now

    def set(self, when: datetime) -> None:
        with self._lock:
            if when < self._now:
                raise ValueError("a clock cannot go backwards")
            self._now = when

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)


@functools.lru_cache(maxsize=256)
def isoformat(when: datetime) -> str:
    """RFC 3339 with a `Z`, as Kubernetes writes timestamps. (Cached: a controller pass stamps every
    condition it sets with the same `now`.)"""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_isoformat(when: datetime) -> str:
    """RFC 3339 with microseconds (Kubernetes' MicroTime, used by Leases)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str | datetime | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
