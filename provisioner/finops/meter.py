"""The usage meter: turns the snapshots a controller takes at every pass into usage rows that add up to
what the fleet cost.

Pure: `observe(snapshot, now)` and `flush(now)` return rows; the caller writes them. A node is billed from
the first pass that sees its claim launched (with a provider id) to the last pass that sees the claim,
which is where the instance is deleted (the termination controller removes the claim right after the
cloud call). Each node's row covers its own hours within the interval, so a node launched or deleted
between two samples is billed for the time it lived, not for the whole interval; the sum of the rows'
cost is the fleet's cost, and `simulate` and `report` read that one sum.

Allocation (teams, workloads, requests) is sampled at the end of each node's row: a row is one sample.
A pass only notes the node as it saw it (the snapshot's objects are frozen); the sample is taken from
that when the row is written, so a pass costs a lookup per node, not a sample (a 10,000-node cluster
is observed far more often than its rows are written), and a pass its caller says nothing was written
before costs nothing per node: every open node was seen by the last pass, which the meter keeps once. A node unchanged since its last row (the same
StateNode, namespace labels and pool owner) gets that row again with its own time and hours: most of a
steady fleet's rows cost no walk over their pods.

Reservations are metered by `observe_reservations` at every pass, from the reservations the cloud last
offered (`samples.offered_reservations`: asking is a call to the cloud, so the caller asks once per interval)
and our nodes in them now. A reservation is billed from the first pass that sees it offered to the last,
and its row is cut wherever its counts change, so each row holds the counts of the time it covers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from provisioner.finops.rows import ReservationRow, UsageRow
from provisioner.finops.samples import OfferedReservation, pool_owners, reservation_rows, usage_row
from provisioner.state.cluster import Snapshot, StateNode

Row = TypeVar("Row", UsageRow, ReservationRow)


@dataclass(slots=True)
class _Open(Generic[Row]):
    since: datetime
    """Start of the hours not yet written."""
    last_seen: datetime
    sample: Row
    """The reservation as last seen (hours and time are set when the row is written)."""


@dataclass(slots=True)
class _OpenNode:
    since: datetime
    """Start of the hours not yet written (every open node was seen by the meter's last pass)."""
    node: StateNode
    """The node as last seen..."""
    teams: Mapping[str, str]
    pool_owner: str
    """...with its namespaces' teams and its pool's owner then: the row's sample."""
    row: UsageRow | None = None
    """The last row written from that same sample (None once the sample changed): the next row is it
    with its own time and hours, since nothing else in a row depends on them."""


class UsageMeter:
    def __init__(self, *, interval: timedelta) -> None:
        self.interval = interval
        self._open: dict[str, _OpenNode] = {}
        """Claim name -> what is not yet written."""
        self._seen_at: datetime | None = None
        """The last pass: every open node was alive then (a pass notes every node alive)."""
        self._teams: Mapping[str, str] = {}
        """The namespaces' teams as last seen: every snapshot gives a copy of its own, and holding one
        object while they stay equal lets a node's unchanged sample be told by identity."""
        self._last_emit: datetime | None = None
        self._reserved: dict[str, _Open[ReservationRow]] = {}
        """Reservation id -> what is not yet written."""
        self._last_reserved_emit: datetime | None = None
        self._offered: Sequence[OfferedReservation] | None = None
        """The offer the last pass noted (the caller hands the same list until it asks the cloud again)."""

    def observe(self, snapshot: Snapshot, now: datetime, *, changed: bool = True) -> list[UsageRow]:
        """Note the nodes alive at `now`; return the rows of nodes gone since the last pass, and every
        node's row when an interval has passed. `changed=False` says the snapshot holds the same objects
        as the last pass's (nothing was written since): the nodes are as they were, and are not walked."""
        rows = self._note(snapshot, now) if changed or self._seen_at is None else []
        self._seen_at = now
        if self._last_emit is None:
            self._last_emit = now
        elif now - self._last_emit >= self.interval:
            rows += self.flush(now)
        return rows

    def _note(self, snapshot: Snapshot, now: datetime) -> list[UsageRow]:
        """Walk the snapshot's nodes: open the new, take a new sample of the changed, close the gone."""
        owners = pool_owners(snapshot)
        teams = snapshot.team_names()
        if teams != self._teams:
            self._teams = teams
        teams = self._teams
        alive: set[str] = set()
        for node in snapshot.nodes:
            claim = node.claim
            if claim is None or not claim.status.provider_id:
                continue
            alive.add(claim.name)
            owner = owners.get(node.nodepool or "", "")
            entry = self._open.get(claim.name)
            if entry is None:
                self._open[claim.name] = _OpenNode(since=now, node=node, teams=teams, pool_owner=owner)
                continue
            # A snapshot hands back the same (frozen) StateNode while the node, its claim and its pods
            # are unchanged: only a new one, new namespace labels or a new pool owner make a new sample.
            if entry.node is not node or entry.teams is not teams or entry.pool_owner != owner:
                entry.node, entry.teams, entry.pool_owner = node, teams, owner
                entry.row = None
        # A node gone was last seen by the last pass: billed up to then.
        gone = [self._open.pop(name) for name in sorted(set(self._open) - alive)]
        seen = self._seen_at
        return [self._node_row(entry, seen) for entry in gone if seen is not None and seen > entry.since]

    def flush(self, now: datetime) -> list[UsageRow]:
        """Rows for every node still alive, up to `now` (at each interval, and when the controller stops)."""
        self._last_emit = now
        seen = now if self._seen_at is None else max(self._seen_at, now)
        self._seen_at = seen
        rows = []
        for name in sorted(self._open):
            entry = self._open[name]
            if seen > entry.since:
                rows.append(self._node_row(entry, seen))
            entry.since = now
        return rows

    def observe_reservations(
        self,
        snapshot: Snapshot,
        offered: Sequence[OfferedReservation],
        now: datetime,
        *,
        changed: bool = True,
    ) -> list[ReservationRow]:
        """Note the reservations offered (as the cloud last answered) with our nodes in them at `now`.
        A reservation whose counts changed since the last pass gets a row up to `now` with the counts it
        had, so a node leaving shows as idle from the pass it left; every reservation gets a row each
        interval, and one gone from the offer its last row. `changed=False` (the same snapshot objects as
        the last pass's) with the very same `offered` as last time: the counts are as they were."""
        rows: list[ReservationRow] = []
        if changed or offered is not self._offered:
            rows = self._note_reservations(snapshot, offered, now)
        else:
            for entry in self._reserved.values():
                entry.last_seen = now
        self._offered = offered
        if self._last_reserved_emit is None:
            self._last_reserved_emit = now
        elif now - self._last_reserved_emit >= self.interval:
            rows += self.flush_reservations(now)
        return [r for r in rows if r.hours > 0]

    def _note_reservations(
        self, snapshot: Snapshot, offered: Sequence[OfferedReservation], now: datetime
    ) -> list[ReservationRow]:
        seen = {r.reservation_id: r for r in reservation_rows(snapshot, offered, time=now)}
        rows = []
        for rid in sorted(set(self._reserved) | set(seen)):
            entry = self._reserved.get(rid)
            sample = seen.get(rid)
            if sample is None:
                assert entry is not None
                rows.append(self._row(self._reserved.pop(rid)))
            elif entry is None:
                self._reserved[rid] = _Open(since=now, last_seen=now, sample=sample)
            elif replace(sample, time=entry.sample.time) != entry.sample:
                entry.last_seen = now
                rows.append(self._row(entry))
                self._reserved[rid] = _Open(since=now, last_seen=now, sample=sample)
            else:
                entry.last_seen = now
        return rows

    def flush_reservations(self, now: datetime) -> list[ReservationRow]:
        """Rows for every reservation still offered, up to `now`."""
        self._last_reserved_emit = now
        rows = []
        for rid in sorted(self._reserved):
            entry = self._reserved[rid]
            entry.last_seen = max(entry.last_seen, now)
            rows.append(self._row(entry))
            entry.since = now
        return [r for r in rows if r.hours > 0]

    @staticmethod
    def _row(entry: _Open[Row]) -> Row:
        hours = (entry.last_seen - entry.since).total_seconds() / 3600
        return replace(entry.sample, time=entry.since, hours=hours)

    @staticmethod
    def _node_row(entry: _OpenNode, last_seen: datetime) -> UsageRow:
        hours = (last_seen - entry.since).total_seconds() / 3600
        if entry.row is not None:
            entry.row = entry.row.spanning(entry.since, hours)
        else:
            entry.row = usage_row(
                entry.node,
                time=entry.since,
                hours=hours,
                teams=entry.teams,
                pool_owner=entry.pool_owner,
            )
        return entry.row
