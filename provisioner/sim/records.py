"""What a run with time records for its output: each NodeClaim seen (`ClaimRecord`: when it was created,
launched and deleted, what it ran on, every pod ever bound to its node), each timeline step as it applied
(`StepRecord`), and the `RunResult` the runner hands the console and the output. `ClaimLog` keeps the
claims' records up to date from what was written since the last tick. Running is `provisioner.sim.runner`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from provisioner.api import labels as wk
from provisioner.api.common import is_true
from provisioner.api.nodeclaim import INITIALIZED
from provisioner.cloudprovider.plugin import SimulatedCloud
from provisioner.finops.ledger import Ledger
from provisioner.finops.recorder import LedgerRecorder
from provisioner.finops.rows import ActionRow, BestRow, ReservationRow, UsageRow
from provisioner.sim.timeline import LoadedStep
from provisioner.state import ClusterState, Pod


@dataclass
class ClaimRecord:
    """A NodeClaim seen during the run, for the output."""

    name: str
    nodepool: str
    created: datetime
    instance_type: str = ""
    zone: str = ""
    capacity_type: str = ""
    reservation_id: str = ""
    price: float = 0.0
    options: list[str] = field(default_factory=list)
    launched: datetime | None = None
    deleted: datetime | None = None
    pods: set[str] = field(default_factory=set)
    """Every pod ever bound to it."""


@dataclass
class StepRecord:
    step: LoadedStep
    time: datetime
    cost_before: float
    nodes_before: int


@dataclass
class RunResult:
    start: datetime
    end: datetime
    state: ClusterState
    claims: dict[str, ClaimRecord]
    steps: list[StepRecord]
    actions: list[ActionRow]
    usage: list[UsageRow]
    last_results: Any
    fake: SimulatedCloud
    ticks: int = 0
    pods_recreated: int = 0
    pods_completed: list[str] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    """Every Event the controllers recorded, in order."""
    """Pods that finished their run time (`sim.provisioner.sh/runs-for`), in order."""
    max_disrupting: dict[str, int] = field(default_factory=dict)
    """Pool -> the most of its nodes disrupted at once by a voluntary decision (its budget's bound)."""
    held: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Pods waiting for admission at the end -> (pool, why) for each pool of their order."""
    reservations: list[ReservationRow] = field(default_factory=list)
    """The ledger's reservation samples: each reservation's instances, running and used, over the run."""
    best: list[BestRow] = field(default_factory=list)
    """The best possible cost per interval, when `simulate --best-possible` solved it."""
    demand: list[tuple[datetime, tuple[Pod, ...]]] = field(default_factory=list)
    """(time, the pods wanting capacity from then on) at every change; empty past `DEMAND_PODS` pods."""
    avoided: dict[str, Any] = field(default_factory=dict)
    """Gang -> what a one-at-a-time launch would have billed for it (`sim.gangs.Avoided`)."""
    ledger: Ledger | None = None
    """The run's ledger, open while its caller keeps it: the blockers (one row per node kept per
    evaluation, the most rows of a large run) are read from it only by the report that shows them."""


class RunRecorder(LedgerRecorder):
    """The run's ledger recorder: writes at once, in the run's thread (deterministic), and keeps the usage
    rows the meter hands it for the run's result (`usage`), writing them to the ledger only when the
    ledger is saved (`save_usage`): a large run's hundreds of thousands of rows, written and read back,
    were a tenth of its time. Blocker rows are written only when something reads them (`keep_blockers`)."""

    def __init__(self, ledger: Ledger, *, save_usage: bool = True, keep_blockers: bool = True) -> None:
        super().__init__(ledger, background=False, keep_blockers=keep_blockers)
        self.save_usage = save_usage
        self._usage: list[UsageRow] = []

    def usage(self, rows: Sequence[UsageRow]) -> None:
        self._usage.extend(rows)
        if self.save_usage:
            super().usage(rows)

    def usage_rows(self) -> list[UsageRow]:
        """Every usage row handed in, in time order (rows of one time in the order they came): what the
        ledger gives back of them (`Ledger.usage`), without the round trip."""
        return sorted(self._usage, key=lambda r: r.time)


class ClaimLog:
    """The NodeClaims seen during a run and the pods bound to their nodes, brought up to date each tick
    from the claims and pods written since the last."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.claims: dict[str, ClaimRecord] = {}
        self._claims_written = state.changes("NodeClaim")
        self._pods_written = state.changes("Pod")
        self._claim_of: dict[str, str] = {}
        """Node name -> the claim whose status names it."""
        self._node_of: dict[str, str] = {}
        """Claim -> the node name its status gives."""
        self.unsettled: set[str] = set()
        """Claims deleting or not yet initialized: what the runner waits on before the clock jumps."""

    def observe(self, now: datetime) -> bool:
        """Record the claims and the pods bound to their nodes, from what was written since the last
        tick: a claim first seen, launched or gone; a pod bound (or a claim newly naming a node that has
        pods). A claim's record keeps every pod ever bound to its node. Whether any pod was written (the
        pods wanting capacity may have changed)."""
        named: list[str] = []
        for name in sorted(self._claims_written.take()):
            claim = self.state.claims.get(name)
            before = self._node_of.pop(name, None)
            if before is not None and self._claim_of.get(before) == name:
                del self._claim_of[before]
            rec = self.claims.get(name)
            if claim is None:
                self.unsettled.discard(name)
                if rec is not None and rec.deleted is None:
                    rec.deleted = now
                continue
            if rec is None:
                rec = self.claims[name] = ClaimRecord(
                    name=name,
                    nodepool=claim.nodepool or "",
                    created=now,
                    options=list(claim.instance_type_options()),
                )
            status = claim.status
            if status.provider_id and rec.launched is None:
                rec.launched = now
                rec.instance_type = status.instance_type or ""
                rec.zone = status.zone or ""
                rec.capacity_type = status.capacity_type or ""
                rec.reservation_id = claim.metadata.labels.get(wk.CAPACITY_RESERVATION_ID, "")
                rec.price = status.price_per_hour or 0.0
            if claim.metadata.deletion_timestamp is not None or not is_true(status.conditions, INITIALIZED):
                self.unsettled.add(name)
            else:
                self.unsettled.discard(name)
            if status.node_name:
                self._node_of[name] = status.node_name
                self._claim_of[status.node_name] = name
                if status.node_name != before:
                    named.append(status.node_name)
        written = self._pods_written.take()
        for key in written:
            pod = self.state.pods.get(key)
            if pod is None or pod.is_daemonset_pod:
                continue
            claim_name = self._claim_of.get(pod.node_name or "")
            if claim_name is not None:
                self.claims[claim_name].pods.add(key)
        for node_name in named:  # the pods already on a node its claim names only now
            self.claims[self._claim_of[node_name]].pods.update(
                p.key for p in self.state.pods_on(node_name) if not p.is_daemonset_pod
            )
        return bool(written)
