"""The Manager: builds the controllers over one ClusterState, ClusterAPI, set of providers and Clock, and
runs them in order, one `step(now)` at a time, only while this replica leads.

Order matters within a step: interruptions first (so provisioning solves their pods in the same step),
then admission (team pods through their quota), provisioning, lifecycle, usage metering (with a ledger),
node repair, disruption (when enabled), termination, garbage collection, pool status. `provisioner run` calls `run()`;
`provisioner simulate` and the tests call `step()` with a virtual clock.

With a ledger recorder, disruption hands it its actions and blockers and the usage controller its
samples. Only the leader steps, so only the leader writes.

With `sharding` (replicas sharing the NodePools, `controllers/sharding.py`), the pool controllers read
this replica's part of the state, and the controllers whose decisions span pools (`GLOBAL_CONTROLLERS`)
run on the whole of it, only in the replica holding quota admission.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypedDict

from provisioner import scheduling
from provisioner.clock import Clock
from provisioner.clusterapi import ClusterAPI, NotLeader
from provisioner.controllers.admission import AdmissionController
from provisioner.controllers.disruption import DisruptionController, DisruptionSettings
from provisioner.controllers.gc import GarbageCollector
from provisioner.controllers.interruption import InterruptionController
from provisioner.controllers.lifecycle import LifecycleController
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.nodepool import NodePoolStatusController
from provisioner.controllers.provider_set import ProviderSet
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.controllers.provisioning_requests import ProvisioningRequestController, RequestQuota
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.repair import RepairController
from provisioner.controllers.settings import ControllerSettings
from provisioner.controllers.sharding import GLOBAL_CONTROLLERS, Sharding, ShardLabels
from provisioner.controllers.termination import TerminationController
from provisioner.controllers.usage import UsageController
from provisioner.finops.recorder import LedgerRecorder
from provisioner.scheduling import SolveFn, SolveOptions
from provisioner.scheduling.results import GangOutcome
from provisioner.state import ClusterState
from provisioner.state.objects import Pod

log = logging.getLogger(__name__)


class Manager:
    def __init__(
        self,
        *,
        state: ClusterState,
        cluster: ClusterAPI,
        providers: ProviderSet,
        clock: Clock,
        settings: ControllerSettings | None = None,
        metrics: Metrics | None = None,
        solve: SolveFn = scheduling.solve,
        solve_options: SolveOptions | None = None,
        is_leader: Callable[[], bool] = lambda: True,
        disruption: bool = False,
        disruption_settings: DisruptionSettings | None = None,
        recorder: LedgerRecorder | None = None,
        sharding: Sharding | None = None,
    ) -> None:
        self.state = state
        self.cluster = cluster
        self.providers = providers
        self.clock = clock
        self.settings = settings or ControllerSettings()
        self.metrics = metrics or Metrics()
        self.is_leader = is_leader
        self.sharding = sharding
        everything = _Shape(
            state=state,
            cluster=cluster,
            providers=providers,
            settings=self.settings,
            metrics=self.metrics,
            clock=clock,
        )
        # Sharded, the pool controllers see this replica's pools only; the ones in
        # sharding.GLOBAL_CONTROLLERS the whole cluster (and run only where quota admission is held).
        shape = _Shape(
            state=sharding.state(state) if sharding is not None else state,
            cluster=sharding.cluster(cluster) if sharding is not None else cluster,
            providers=providers,
            settings=self.settings,
            metrics=self.metrics,
            clock=clock,
        )
        if sharding is None:
            self.requests = ProvisioningRequestController(
                **everything, solve=solve, gang_outcome=self._gang_outcome
            )
        else:
            # Decided, booked and launched by the replica the request's pods are routed to first, over
            # its part of the cluster; its team quota is the admission holder's word (RequestQuota).
            self.requests = ProvisioningRequestController(
                **shape,
                solve=solve,
                gang_outcome=self._gang_outcome,
                decides=lambda pods: (
                    bool(sharding.take(pods[:1], state)) if pods else sharding.holds_admission()
                ),
                quota_by_annotation=True,
            )
        self.provisioning = ProvisioningController(
            **shape,
            solve=solve,
            solve_options=solve_options,
            booked=self._booked,
            pass_on=(lambda u, now: sharding.pass_on(cluster, state, u, now))
            if sharding is not None
            else None,
        )
        self.interruption = InterruptionController(**everything, on_interrupted=self.provisioning.trigger)
        self.admission = AdmissionController(**everything)
        if sharding is not None:
            # Its replica watches whole only the namespaces quota counts in (and its shards' pods).
            self.admission.counted_namespaces = sharding.counted_namespaces
            self.admission.gated_label = True
            self.admission.cluster = sharding.admission_cluster(cluster)
        self.lifecycle = LifecycleController(**shape, recorder=recorder)
        self.termination = TerminationController(**shape, recorder=recorder)
        self.gc = GarbageCollector(**everything)
        self.repair = RepairController(**shape, recorder=recorder)
        self.nodepools = NodePoolStatusController(**shape)
        self.controllers: list[tuple[str, Reconciler]] = [
            ("interruption", self.interruption),
            ("admission", self.admission),
            ("provisioningrequests", self.requests),
            ("provisioning", self.provisioning),
            ("lifecycle", self.lifecycle),
            ("repair", self.repair),
            ("termination", self.termination),
            ("gc", self.gc),
            ("nodepool", self.nodepools),
        ]
        if sharding is not None:
            # Every replica, on the whole state: its pods' shard labels, which its pod watch selects by.
            self.controllers.insert(0, ("shardlabels", ShardLabels(**everything, sharding=sharding)))
            quota_word = RequestQuota(**everything, counted_namespaces=sharding.counted_namespaces)
            quota_word.cluster = sharding.admission_cluster(cluster)
            self.controllers.insert(
                self.controllers.index(("provisioningrequests", self.requests)),
                ("requestquota", quota_word),
            )
        self.recorder = recorder
        self.usage: UsageController | None = None
        if recorder is not None:
            # After lifecycle, before termination: each node billed from launch to deletion.
            self.usage = UsageController(**shape, recorder=recorder)
            self.controllers.insert(
                self.controllers.index(("lifecycle", self.lifecycle)) + 1, ("usage", self.usage)
            )
        self.disruption: DisruptionController | None = None
        if disruption:
            # Consolidation, drift, expiry: its deletions go through termination in the same step.
            self.disruption = DisruptionController(
                **shape,
                solve=solve,
                recorder=recorder,
                disruption=disruption_settings or DisruptionSettings(),
                booked=self._booked,
            )
            if sharding is not None:
                self.disruption.confirm = lambda nodes: sharding.confirm(nodes, state, cluster)
            self.controllers.insert(
                self.controllers.index(("termination", self.termination)), ("disruption", self.disruption)
            )

    def _booked(self) -> Sequence[Pod]:
        pods = self.requests.booked_pods()
        if self.sharding is None or not pods:
            return pods
        return self.sharding.take(pods, self.state)

    def _gang_outcome(self, name: str) -> GangOutcome | None:
        """What the last provisioning solve decided for a gang (a ProvisioningRequest's reason)."""
        results = self.provisioning.last_results
        return next((g for g in (results.gangs if results else ()) if g.name == name), None)

    def step(self, now: datetime | None = None) -> bool:
        """One pass of every controller. Returns False (and does nothing) when not the leader."""
        leading = self.is_leader()
        self.metrics.leader.set(1 if leading else 0)
        if not leading:
            return False
        when = now or self.clock.now()
        admits = self.sharding is None or self.sharding.holds_admission()
        for name, controller in self.controllers:
            if not self.is_leader():
                return False
            if not admits and name in GLOBAL_CONTROLLERS:
                continue
            try:
                controller.reconcile(when)
            except NotLeader:
                log.warning("lost the lease during %s; stopping", name)
                return False
            except Exception:
                self.metrics.reconcile_errors.labels(controller=name).inc()
                log.exception("%s reconcile failed", name)
        return True

    def run(self, stop: threading.Event, *, interval: float = 1.0) -> None:
        """Step every `interval` seconds of the real clock until `stop` is set."""
        led = False
        while not stop.is_set():
            led = self.step()
            if self.recorder is not None:
                self.metrics.ledger_rows_pending.set(self.recorder.pending)
            stop.wait(interval)
        if self.usage is not None and led:
            # The hours since the last sample, so a restart loses none of them. (Led in the last pass:
            # the lease may already be going as the process stops.)
            self.usage.flush(self.clock.now())


class _Shape(TypedDict):
    """What the Manager gives every controller (the fields of `Reconciler`)."""

    state: ClusterState
    cluster: ClusterAPI
    providers: ProviderSet
    settings: ControllerSettings
    metrics: Metrics
    clock: Clock
