"""The usage meter: turns the snapshots a controller takes at every pass into usage rows that add up to
what the fleet cost.

Pure: `observe(snapshot, now)` and `flush(now)` return rows; the caller writes them. A node is billed from
the first pass that sees its claim launched (with a provider id) to the last pass that sees the claim,
which is where the instance is deleted (the termination controller removes the claim right after the
cloud call). Each node's row covers its own hours within the interval, so a node launched or deleted
between two samples is billed for the time it lived, not for the whole interval; the sum of the rows'
cost is the fleet's cost, and `simulate` and `report` read that one sum.

Allocation (teams, workloads, requests) is sampled at the end of each node's row: a row is one sample.

Reservations are metered the same way by `observe_reservations`, which the caller hands the reservations
the cloud offers now (a call to the cloud, so it is made once per interval, not every pass): a reservation
is billed from the first sample that sees it to the last, every row written up to that sample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Generic, TypeVar

from provisioner.finops.rows import ReservationRow, UsageRow, pool_owners, reservation_rows, usage_row
from provisioner.state.cluster import Snapshot

if TYPE_CHECKING:
    from provisioner.cloudprovider.types import InstanceType

Row = TypeVar("Row", UsageRow, ReservationRow)


@dataclass(slots=True)
class _Open(Generic[Row]):
    since: datetime
    """Start of the hours not yet written."""
    last_seen: datetime
    sample: Row
    """The node (or reservation) as last seen (hours and time are set when the row is written)."""


class UsageMeter:
    def __init__(self, *, interval: timedelta) -> None:
        self.interval = interval
        self._open: dict[str, _Open[UsageRow]] = {}
        """Claim name -> what is not yet written."""
        self._last_emit: datetime | None = None
        self._reserved: dict[str, _Open[ReservationRow]] = {}
        """Reservation id -> what is not yet written."""

    def observe(self, snapshot: Snapshot, now: datetime) -> list[UsageRow]:
        """Note the nodes alive at `now`; return the rows of nodes gone since the last pass, and every
        node's row when an interval has passed."""
        owners = pool_owners(snapshot)
        alive: set[str] = set()
        for node in snapshot.nodes:
            claim = node.claim
            if claim is None or not claim.status.provider_id:
                continue
            alive.add(claim.name)
            sample = usage_row(
                node,
                time=now,
                hours=0.0,
                namespaces=snapshot.namespaces,
                pool_owner=owners.get(node.nodepool or "", ""),
            )
            entry = self._open.get(claim.name)
            if entry is None:
                self._open[claim.name] = _Open(since=now, last_seen=now, sample=sample)
            else:
                entry.last_seen, entry.sample = now, sample
        rows = [self._row(self._open.pop(name)) for name in sorted(set(self._open) - alive)]
        if self._last_emit is None:
            self._last_emit = now
        elif now - self._last_emit >= self.interval:
            rows += self.flush(now)
        return [r for r in rows if r.hours > 0]

    def flush(self, now: datetime) -> list[UsageRow]:
        """Rows for every node still alive, up to `now` (at each interval, and when the controller stops)."""
        self._last_emit = now
        rows = []
        for name in sorted(self._open):
            entry = self._open[name]
            entry.last_seen = max(entry.last_seen, now)
            rows.append(self._row(entry))
            entry.since = now
        return [r for r in rows if r.hours > 0]

    def observe_reservations(
        self, snapshot: Snapshot, instance_types: Mapping[str, Sequence[InstanceType]], now: datetime
    ) -> list[ReservationRow]:
        """Note the reservations the pools' offerings carry at `now` (pool -> its types, as the cloud
        answers); return every reservation's row up to `now`, and the last row of those gone since."""
        seen = {r.reservation_id: r for r in reservation_rows(snapshot, instance_types, time=now)}
        rows = []
        for rid in sorted(set(self._reserved) | set(seen)):
            entry = self._reserved.get(rid)
            sample = seen.get(rid)
            if entry is None:
                assert sample is not None
                self._reserved[rid] = _Open(since=now, last_seen=now, sample=sample)
                continue
            if sample is None:
                rows.append(self._row(self._reserved.pop(rid)))
                continue
            entry.last_seen, entry.sample = now, sample
            rows.append(self._row(entry))
            entry.since = now
        return [r for r in rows if r.hours > 0]

    @staticmethod
    def _row(entry: _Open[Row]) -> Row:
        hours = (entry.last_seen - entry.since).total_seconds() / 3600
        return replace(entry.sample, time=entry.since, hours=hours)
