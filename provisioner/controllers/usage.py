"""Usage metering: every pass, what each launched node costs and who uses it, handed to the ledger
recorder (the meter in `provisioner.finops.meter` decides the rows; this controller only feeds it the
cluster and passes the rows on).

It runs after lifecycle (a node launched in this pass is seen in this pass) and before termination (a
node deleted in this pass is billed up to this pass), so the rows bill each instance from launch to
deletion at the controller's resolution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from provisioner.controllers.reconciler import Reconciler
from provisioner.finops.meter import UsageMeter
from provisioner.finops.recorder import LedgerRecorder

DEFAULT_INTERVAL = timedelta(minutes=5)
"""How often every node's usage row is written (nodes that go away are written when they go)."""


@dataclass(kw_only=True, eq=False)
class UsageController(Reconciler):
    recorder: LedgerRecorder
    interval: timedelta = DEFAULT_INTERVAL
    _meter: UsageMeter = field(init=False)

    def __post_init__(self) -> None:
        self._meter = UsageMeter(interval=self.interval)

    def reconcile(self, now: datetime) -> None:
        self.recorder.usage(self._meter.observe(self.state.snapshot(), now))

    def flush(self, now: datetime) -> None:
        """Write every node's hours up to `now` (the end of a run, or shutdown)."""
        self.recorder.usage(self._meter.flush(now))
