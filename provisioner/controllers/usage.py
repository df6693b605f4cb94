"""Usage metering: every pass, what each launched node costs and who uses it, handed to the ledger
recorder (the meter in `provisioner.finops.meter` decides the rows; this controller only feeds it the
cluster and passes the rows on).

It runs after lifecycle (a node launched in this pass is seen in this pass) and before termination (a
node deleted in this pass is billed up to this pass), so the rows bill each instance from launch to
deletion at the controller's resolution.

Once per interval (and when flushed) it also asks the clouds which reservations the pools' NodeClasses
select, with their counts, so the ledger holds each reservation's paid, used and idle hours.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from provisioner.controllers.provider_set import pool_instance_types
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.watch import Watch
from provisioner.finops.meter import UsageMeter
from provisioner.finops.recorder import LedgerRecorder
from provisioner.finops.samples import OfferedReservation, offered_reservations
from provisioner.state import Snapshot

DEFAULT_INTERVAL = timedelta(minutes=5)
"""How often every node's usage row is written (nodes that go away are written when they go)."""


@dataclass(kw_only=True, eq=False)
class UsageController(Reconciler):
    recorder: LedgerRecorder
    interval: timedelta = DEFAULT_INTERVAL
    _meter: UsageMeter = field(init=False)
    _offered: list[OfferedReservation] = field(default_factory=list, init=False)
    """The reservations the clouds last offered."""
    _next_ask: datetime | None = field(default=None, init=False)
    _watch: Watch = field(init=False)

    def __post_init__(self) -> None:
        self._meter = UsageMeter(interval=self.interval)
        # What a node's row is made of: its Node, claim and pods, its namespaces' teams, its pool's owner.
        self._watch = Watch(
            self.state, ("NodeClaim", "Node", "Pod", "Namespace", "Team", "NodePool"), owns=self.owns
        )

    def reconcile(self, now: datetime) -> None:
        # Nothing written since the last pass: the meter only notes the time (no walk over the nodes).
        changed = bool(self._watch.take())
        snap = self.state.snapshot()
        self.recorder.usage(self._meter.observe(snap, now, changed=changed))
        if self._next_ask is None or now >= self._next_ask:
            self._ask(snap, now)
        self.recorder.reservations(
            self._meter.observe_reservations(snap, self._offered, now, changed=changed)
        )

    def flush(self, now: datetime) -> None:
        """Write every node's and reservation's hours up to `now` (the end of a run, or shutdown)."""
        self.recorder.usage(self._meter.flush(now))
        self.recorder.reservations(self._meter.flush_reservations(now))

    def _ask(self, snap: Snapshot, now: datetime) -> None:
        """Which reservations the pools' NodeClasses select, with their counts (a call to each cloud)."""
        self._next_ask = now + self.interval
        self._offered = offered_reservations(snap, pool_instance_types(self.providers, snap, snap.nodepools))
