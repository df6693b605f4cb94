"""The unavailable-offerings cache: which (instance type, zone, capacity type) ran out, until when.

An InsufficientCapacity from a launch marks the offerings it names for a TTL that depends on the error's
kind (a stockout clears in minutes, a quota rarely does); `apply` flags those offerings unavailable in
the instance types the scheduler sees, so the next solve skips them instead of retrying into the same
wall. Pure: every method takes `now`; nothing here reads a clock. Thread-safe, since the provisioning
and lifecycle controllers share one cache.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from provisioner.cloudprovider.errors import InsufficientCapacity, OfferingKey
from provisioner.cloudprovider.types import InstanceType

DEFAULT_TTL = timedelta(minutes=3)
"""Karpenter's default for a capacity error."""
DEFAULT_TTLS: Mapping[str, timedelta] = {
    "capacity": DEFAULT_TTL,
    # A quota is lifted by a person, not by the cloud's pool refilling: keep away longer.
    "quota": timedelta(minutes=15),
}


class UnavailableOfferings:
    """(type, zone, capacity type) -> expiry. Kinds without a TTL of their own use `default_ttl`."""

    def __init__(
        self,
        *,
        default_ttl: timedelta = DEFAULT_TTL,
        ttls: Mapping[str, timedelta] | None = None,
    ) -> None:
        self.default_ttl = default_ttl
        self.ttls = dict(DEFAULT_TTLS if ttls is None else ttls)
        self._expiry: dict[OfferingKey, datetime] = {}
        self._kinds: dict[OfferingKey, str] = {}
        self._lock = threading.Lock()
        self.generation = 0
        """Bumped on every change, so callers can cache work derived from `apply` and know when to redo it."""

    def ttl(self, kind: str) -> timedelta:
        return self.ttls.get(kind, self.default_ttl)

    def mark(
        self,
        offerings: Iterable[OfferingKey],
        *,
        now: datetime,
        kind: str = "capacity",
        ttl: timedelta | None = None,
    ) -> None:
        """Mark offerings unavailable until `now + ttl` (the kind's TTL when None). A later expiry wins."""
        until = now + (ttl if ttl is not None else self.ttl(kind))
        with self._lock:
            for key in offerings:
                current = self._expiry.get(key)
                if current is None or current <= until:
                    self._expiry[key] = until
                    self._kinds[key] = kind
            self.generation += 1

    def mark_error(self, error: InsufficientCapacity, *, now: datetime) -> None:
        """Mark the offerings an InsufficientCapacity names, for its kind's TTL."""
        self.mark(error.offerings, now=now, kind=error.kind)

    def is_unavailable(self, key: OfferingKey, *, now: datetime) -> bool:
        with self._lock:
            until = self._expiry.get(key)
            return until is not None and now < until

    def entries(self, *, now: datetime) -> dict[OfferingKey, tuple[str, datetime]]:
        """Live entries: key -> (kind, expiry)."""
        with self._lock:
            return {k: (self._kinds[k], t) for k, t in self._expiry.items() if now < t}

    def expire(self, *, now: datetime) -> int:
        """Drop entries whose TTL has passed; returns how many."""
        with self._lock:
            gone = [k for k, t in self._expiry.items() if now >= t]
            for key in gone:
                del self._expiry[key]
                del self._kinds[key]
            if gone:
                self.generation += 1
            return len(gone)

    def clear(self) -> None:
        with self._lock:
            self._expiry.clear()
            self._kinds.clear()
            self.generation += 1

    def __len__(self) -> int:
        return len(self._expiry)

    def apply(self, instance_types: Iterable[InstanceType], *, now: datetime) -> list[InstanceType]:
        """Copies of the types with every cached offering flagged `available=False` (others untouched;
        a type with no cached offering is returned as is)."""
        with self._lock:
            live = {k for k, t in self._expiry.items() if now < t}
        if not live:
            return list(instance_types)
        out = []
        for t in instance_types:
            if not any(o.offering_key(t.name) in live for o in t.offerings):
                out.append(t)
                continue
            out.append(
                t.with_offerings(
                    tuple(
                        replace(o, available=False) if o.available and o.offering_key(t.name) in live else o
                        for o in t.offerings
                    )
                )
            )
        return out
