"""`provisioner simulate` with time: the real controllers (interruption, provisioning, lifecycle,
disruption, termination, garbage collection, pool status) run over the embedded cluster, the fake cloud
wrapped as in production (metrics, the unavailable-offerings cache, retries) and a virtual clock, while
the scenario's timeline applies and deletes workloads, runs offerings out and brings them back, and
interrupts nodes.

Time moves in ticks (15 s by default). When nothing has changed for a minute and nothing is in flight,
the clock jumps (5 min at most, never past the next step), so an idle afternoon costs a few ticks. The
same scenario gives the same output every run: claim names and command ids come from a counter
(`counting_names`, the controllers' `name_suffix`), and every stand-in walks objects in name order.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from provisioner.api import durations
from provisioner.api import labels as wk
from provisioner.api.team import Department, Team
from provisioner.clock import VirtualClock
from provisioner.cloudprovider import registry, wrappers
from provisioner.controllers.manager import Manager
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.provider_set import ProviderSet
from provisioner.controllers.settings import ControllerSettings
from provisioner.finops.ledger import Ledger
from provisioner.sim import catalogs
from provisioner.sim import gangs as sim_gangs
from provisioner.sim.binder import Binder
from provisioner.sim.cluster import (
    DaemonSets,
    Kubelets,
    SimCluster,
    Workloads,
    daemonset_doc,
)
from provisioner.sim.loaded import LoadedScenario
from provisioner.sim.pool_types import PoolScopedTypes, admits
from provisioner.sim.records import ClaimLog, RunRecorder, RunResult, StepRecord
from provisioner.sim.scenario_spec import ReservationSpec
from provisioner.sim.timeline import LoadedStep, Timeline, matches_workload
from provisioner.state import ClusterState, Pod

log = logging.getLogger(__name__)

START = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
"""Virtual time 0 of every run (a Monday, midnight UTC, so budget schedules read naturally)."""
TICK = timedelta(seconds=15)
IDLE_JUMP = timedelta(minutes=5)
QUIET_TICKS = 4
DEMAND_PODS = 2000
"""Past this many pods a run notes no demand for the best possible cost (an exact MILP would not solve)."""
"""Ticks without any change (and nothing in flight) before the clock starts jumping."""


def counting_names() -> Callable[[], str]:
    """Name suffixes from a counter (`000001`, `000002`, ...): the controllers' `name_suffix` in a run, so
    claim names (and with them node names, provider ids and every ordering by name) repeat run to run."""
    counter = itertools.count(1)
    return lambda: f"{next(counter):06x}"


class Runner:
    def __init__(
        self,
        loaded: LoadedScenario,
        timeline: Timeline,
        *,
        ledger: Ledger,
        tick: timedelta = TICK,
        idle_jump: timedelta = IDLE_JUMP,
        progress: Callable[[timedelta], None] | None = None,
        note_demand: bool = False,
        keep_blockers: bool = True,
        save_usage: bool = True,
    ) -> None:
        self.loaded = loaded
        self.note_demand = note_demand
        """Note the pods wanting capacity at every change (`simulate --best-possible` solves over them)."""
        self.keep_blockers = keep_blockers
        """Write every evaluation's blocker rows to the ledger (only the full report and a saved ledger
        read them)."""
        self.save_usage = save_usage
        """Write the usage rows to the ledger too (a saved ledger reads them; the result has them anyway)."""
        self.timeline = timeline
        self.ledger = ledger
        self.tick = tick
        self.idle_jump = idle_jump
        self.progress = progress or (lambda _elapsed: None)

    # ---- setting up --------------------------------------------------------------------------------

    def _build(self) -> None:
        loaded = self.loaded
        spec = loaded.scenario.spec
        self.clock = VirtualClock(START)
        self.state = ClusterState()
        self.claim_log = ClaimLog(self.state)
        self.cluster = SimCluster(self.state, self.clock)
        self.demand: list[tuple[datetime, tuple[Pod, ...]]] = []
        """(time, the pods wanting capacity from then on), at every change (`_note_demand`)."""
        self.demand_too_large = False
        self._demand_changed = True
        # Like a real cloud, the simulated one does not publish its stockouts: launches meet them (and
        # fall back), the unavailable-offerings cache remembers them for a while, and a plan may count on
        # capacity that is out, fail to launch it, and back off.
        # Only the types some pool could launch: the others change no decision, and the whole region's
        # catalog would be scanned at every evaluation of a run that evaluates hundreds of times.
        usable = [t for t in loaded.catalog_types if any(admits(p, t) for p in loaded.nodepools)]
        self.fake = registry.simulated([_available_again(t) for t in usable], self.clock.now)
        self._mark(spec.unavailable, available=False)
        self._set_capacity(spec.capacity)
        self.block_ends: dict[str, datetime] = {}
        for reservation in spec.reservations:
            self._reserve(reservation)
        self.avoided = sim_gangs.AvoidedMeter(self.fake)
        self.kubelets = Kubelets(self.cluster, {t.name: t for t in self.fake.catalog})
        self.fake.on_launch = self.kubelets.on_launch
        self.fake.on_delete = self.kubelets.on_delete
        # As production stacks them; retries never sleep on the virtual clock's behalf.
        self.scoped = PoolScopedTypes(
            self.fake,
            loaded.nodepools,
            zones_for=lambda nc: catalogs.nodeclass_zones(nc, loaded.zones_of(nc.kind)),
        )
        provider = wrappers.wrap(
            self.scoped,
            clock=self.clock.now,
            registry=CollectorRegistry(),
            sleep=lambda _s: None,
        )
        self.recorder = RunRecorder(self.ledger, save_usage=self.save_usage, keep_blockers=self.keep_blockers)
        self.manager = Manager(
            state=self.state,
            cluster=self.cluster,
            providers=ProviderSet.every_kind(provider),
            clock=self.clock,
            settings=ControllerSettings(
                cluster_name="sim", name_suffix=counting_names(), pool_defaults=loaded.pool_defaults
            ),
            metrics=Metrics(CollectorRegistry()),
            disruption=True,
            # Written at once, in this thread: the run stays deterministic.
            recorder=self.recorder,
        )
        assert self.manager.disruption is not None
        self.disruption = self.manager.disruption
        self.binder = Binder(self.cluster)
        self.workloads = Workloads(self.cluster)
        self.daemonsets = DaemonSets(self.cluster)

        for (kind, _name), nc in sorted(loaded.nodeclasses.items(), key=lambda kv: kv[0]):
            self.state.upsert(kind, nc.to_dict())
        for pool in loaded.nodepools:
            self.state.upsert("NodePool", pool.to_dict())
        for ns, labels in sorted(loaded.namespaces.items()):
            self.state.upsert("Namespace", {"metadata": {"name": ns, "labels": dict(labels)}})
        # Before any pod: the admission webhook's stand-in gates the pods of teams as they are created.
        quota_objects: list[Department | Team] = [*loaded.departments, *loaded.teams]
        for quota_object in quota_objects:
            self.state.upsert(quota_object.kind, quota_object.to_dict())
        for template in loaded.pod_templates.values():
            self.state.upsert("PodTemplate", template)
        for request in loaded.provisioning_requests:
            doc = request.to_dict()
            doc["metadata"]["creationTimestamp"] = self.cluster.stamp()
            self.state.upsert("ProvisioningRequest", doc)
        for pdb in loaded.pdb_documents:
            self.state.upsert("PodDisruptionBudget", pdb)
        for ds in loaded.daemonsets:
            self.state.upsert("DaemonSet", daemonset_doc(ds))
        for node in loaded.nodes:
            self.state.upsert("Node", _node_doc(node))
        self.workloads.add([p for name in sorted(loaded.bound) for p in loaded.bound[name]])
        self.workloads.add(sorted(loaded.pods, key=lambda p: p.key))

    # ---- the loop ----------------------------------------------------------------------------------

    def run(self) -> RunResult:
        self._build()
        end = START + self.timeline.duration
        steps = list(self.timeline.steps)
        records: list[StepRecord] = []
        quiet = 0
        ticks = 0
        last_generation = -1
        while True:
            now = self.clock.now()
            while steps and START + steps[0].at <= now:
                step = steps.pop(0)
                records.append(
                    StepRecord(step=step, time=now, cost_before=self.cost(), nodes_before=self.node_count())
                )
                self._apply(step)
                quiet = 0
            self._end_blocks(now)
            self._tick(now)
            ticks += 1
            self.progress(now - START)
            if now >= end:
                break
            # Pool status writes are left out: they follow the other changes and never lead to one.
            generation = self.state.generation - self.cluster.pool_status_writes
            changed = generation != last_generation
            last_generation = generation
            quiet = 0 if changed or self._in_flight() else quiet + 1
            delta = self.tick if quiet < QUIET_TICKS else self.idle_jump
            limit = end - now
            if steps:
                limit = min(limit, START + steps[0].at - now)
            for moment in self._block_moments():
                if moment > now:
                    limit = min(limit, moment - now)
            finish = self.workloads.next_completion()
            if finish is not None and finish > now:
                limit = min(limit, finish - now)
            self.clock.advance(max(min(delta, limit), timedelta(0)) or self.tick)
        assert self.manager.usage is not None
        self.manager.usage.flush(self.clock.now())
        actions = list(self.disruption.actions)
        return RunResult(
            start=START,
            end=self.clock.now(),
            state=self.state,
            claims=self.claim_log.claims,
            steps=records,
            actions=actions,
            usage=self.recorder.usage_rows(),
            last_results=self.manager.provisioning.last_results,
            fake=self.fake,
            ticks=ticks,
            pods_recreated=self.workloads.recreated,
            pods_completed=list(self.workloads.completed),
            events=list(self.cluster.events),
            max_disrupting=dict(sorted(self.cluster.max_disrupting.items())),
            held={k: reasons for k, (_, reasons) in sorted(self.manager.admission.held.items())},
            reservations=self.ledger.reservations(),
            ledger=self.ledger,
            demand=[] if self.demand_too_large else list(self.demand),
            avoided=dict(self.avoided.avoided),
        )

    def _tick(self, now: datetime) -> None:
        self.workloads.sync(now)
        self.kubelets.sync(now)
        self.daemonsets.sync()
        self.binder.sync()
        self.manager.step(now)
        self.kubelets.sync(now)
        if self.claim_log.observe(now):
            self._demand_changed = True
        self._note_demand(now)
        self.avoided.saw(self.manager.provisioning.last_results)
        self.avoided.tick(now, self.state)

    def _note_demand(self, now: datetime) -> None:
        """Note the pods that want capacity (pending or running, DaemonSet pods apart) whenever they
        change: the intervals the best possible cost is solved over (`provisioner.sim.best`). Left off
        past `DEMAND_PODS` pods, where an exact optimum would not solve anyway."""
        if not self.note_demand or not self._demand_changed or self.demand_too_large:
            return
        self._demand_changed = False
        if len(self.state.pods) > DEMAND_PODS:
            self.demand_too_large = True
            self.demand.clear()
            return
        pods = tuple(
            sorted(
                (
                    p
                    for p in self.state.pods.values()
                    if not p.is_daemonset_pod and not p.is_terminal and not p.deleting and not p.gated
                ),
                key=lambda p: p.key,
            )
        )
        if not self.demand or {p.key for p in self.demand[-1][1]} != {p.key for p in pods}:
            self.demand.append((now, pods))

    def _in_flight(self) -> bool:
        """Something that moves with time alone: a claim launching or terminating, a pod not yet marked."""
        if self.claim_log.unsettled:  # kept by `ClaimLog.observe`, which runs last in a tick
            return True
        if getattr(self.disruption, "active", None) or getattr(self.disruption, "pending", None):
            return True
        # A gated pod waits for quota, not for time: it moves only when something else does.
        return any(not p.unschedulable and not p.gated for p in self.state.pending.values())

    # ---- timeline steps ----------------------------------------------------------------------------

    def _apply(self, step: LoadedStep) -> None:
        log.info("step at %s: %s", step.at, step.describe())
        # The pods now and the pods to create again, read once for the step and grouped by namespace and
        # by the two names a workload reference can match (its own, its owner's), so each workload
        # deleted costs its pods, not every pod (removing a pod twice is harmless, so the groups can be
        # read before the removals).
        wanted = {(ref.namespace, ref.name) for ref in step.delete}
        pods = _by_names(self.state.pods.values(), wanted) if wanted else {}
        desired = _by_names(self.workloads.desired.values(), wanted) if wanted else {}
        for ref in step.delete:
            if ref.kind in ("Team", "Department"):
                self.state.remove(ref.kind, ref.name)
                continue
            doomed = sorted(
                p.key
                for p in pods.get((ref.namespace, ref.name), ())
                if matches_workload(p, ref.kind, ref.name)
            )
            gone = set(doomed)
            doomed += sorted(
                p.key
                for p in desired.get((ref.namespace, ref.name), ())
                if p.key not in gone and matches_workload(p, ref.kind, ref.name)
            )
            self.workloads.remove(doomed)
        for quota_object in step.quota_objects:
            self.state.upsert(quota_object.kind, quota_object.to_dict())
        if step.pods:
            self.workloads.add(step.pods)
        self._mark(step.unavailable, available=False)
        self._mark(step.available, available=True)
        self._set_capacity(step.capacity)
        for reservation in step.reservations:
            self._reserve(reservation)
        for rid in step.end_reservations:
            self._end_reservation(rid, reclaim=False)
        for sel in step.interrupt:
            for name in sorted(self.state.claims):
                claim = self.state.claims[name]
                if claim.metadata.deletion_timestamp is not None or not claim.status.provider_id:
                    continue
                if sel.node_pool is not None and claim.nodepool != sel.node_pool:
                    continue
                if sel.capacity_type is not None and claim.status.capacity_type != sel.capacity_type:
                    continue
                self.fake.interrupt(
                    claim.status.provider_id, detail=f"timeline step at {durations.format_duration(step.at)}"
                )

    def _reserve(self, r: ReservationSpec) -> None:
        ends = durations.parse_duration(r.ends_at) if r.ends_at else None
        kind = wk.RESERVATION_TYPE_CAPACITY_BLOCK if ends is not None else wk.RESERVATION_TYPE_DEFAULT
        if r.instance_type not in {t.name for t in self.fake.catalog}:
            return  # a type no pool can launch: nothing can run in it
        self.fake.add_reservation(
            r.id,
            instance_type=r.instance_type,
            zone=r.zone,
            count=r.count,
            kind=kind,
            ends_at=START + ends if ends is not None else None,
        )
        if ends is not None:
            self.block_ends[r.id] = START + ends
        if hasattr(self, "scoped"):
            self.scoped.invalidate()

    def _end_reservation(self, reservation_id: str, *, reclaim: bool) -> None:
        """The reservation ends; with `reclaim` (a Capacity Block's end) the cloud takes back the
        instances still in it, as EC2 does."""
        self.fake.end_reservation(reservation_id)
        self.block_ends.pop(reservation_id, None)
        if reclaim:
            for claim in sorted(self.state.claims.values(), key=lambda c: c.name):
                pid = claim.status.provider_id
                if pid and claim.metadata.labels.get(wk.CAPACITY_RESERVATION_ID) == reservation_id:
                    self.fake.interrupt(
                        pid, "capacity-block-end", detail=f"block {reservation_id} ended", reclaim=True
                    )
        self.scoped.invalidate()

    def _end_blocks(self, now: datetime) -> None:
        for rid, end in sorted(self.block_ends.items()):
            if end <= now:
                self._end_reservation(rid, reclaim=True)

    def _block_moments(self) -> list[datetime]:
        """When something happens to a block: the planner's drain ahead of its end, and the end."""
        from provisioner.disruption.expiration_drift import CAPACITY_BLOCK_LEAD

        return sorted(m for end in self.block_ends.values() for m in (end - CAPACITY_BLOCK_LEAD, end))

    def _mark(self, selectors: Any, *, available: bool) -> None:
        known = {t.name for t in self.fake.catalog}
        for sel in selectors:
            if sel.instance_type is not None and sel.instance_type not in known:
                continue  # a type no pool can launch: nothing to run out
            mark = self.fake.mark_available if available else self.fake.mark_unavailable
            mark(instance_type=sel.instance_type, zone=sel.zone, capacity_type=sel.capacity_type)
        if selectors and hasattr(self, "scoped"):
            self.scoped.invalidate()

    def _set_capacity(self, specs: Any) -> None:
        known = {t.name for t in self.fake.catalog}
        for spec in specs:
            if spec.instance_type is None or spec.instance_type in known:
                self.fake.set_capacity(
                    instance_type=spec.instance_type,
                    zone=spec.zone,
                    capacity_type=spec.capacity_type,
                    count=spec.count,
                )
        if specs and hasattr(self, "scoped"):
            self.scoped.invalidate()

    # ---- reading -----------------------------------------------------------------------------------

    def cost(self) -> float:
        return sum(
            c.status.price_per_hour or 0.0
            for c in self.state.claims.values()
            if c.status.provider_id and c.metadata.deletion_timestamp is None
        )

    def node_count(self) -> int:
        return sum(
            1
            for c in self.state.claims.values()
            if c.status.provider_id and c.metadata.deletion_timestamp is None
        )


def _by_names(pods: Iterable[Pod], wanted: set[tuple[str, str]]) -> dict[tuple[str, str], set[Pod]]:
    """(namespace, name) -> the pods of that name or whose owner has it, for the `wanted` names only:
    every pod a workload reference (`timeline.matches_workload`) can match is under the reference's
    namespace and name. (Grouping only what is wanted: a set per pod of a 100,000-pod cluster is most of
    a delete step's cost.)"""
    out: dict[tuple[str, str], set[Pod]] = {}
    for pod in pods:
        key = (pod.namespace, pod.name)
        if key in wanted:
            out.setdefault(key, set()).add(pod)
        if pod.owner_name is not None:
            key = (pod.namespace, pod.owner_name)
            if key in wanted:
                out.setdefault(key, set()).add(pod)
    return out


def _available_again(it: Any) -> Any:
    """The catalog type as the cloud sells it: the loader flagged `spec.unavailable` offerings, but here the
    fake cloud's stockouts say what is out, and they can end."""
    from dataclasses import replace

    return it.with_offerings(tuple(replace(o, available=True) for o in it.offerings))


def _node_doc(node: Any) -> dict[str, Any]:
    """A scenario's Node as the API server would hold it: the capacity the loader filled in from the
    catalog, and Ready unless the file says otherwise."""
    import copy

    from provisioner.api import quantities

    doc = copy.deepcopy(dict(node.raw)) or {"metadata": {"name": node.name, "labels": dict(node.labels)}}
    doc.setdefault("apiVersion", "v1")
    doc["kind"] = "Node"
    status = doc.setdefault("status", {})

    def fmt(rl: dict[str, int]) -> dict[str, str]:
        return {k: quantities.format_quantity(k, v) for k, v in sorted(rl.items())}

    if not status.get("allocatable") and node.allocatable:
        status["allocatable"] = fmt(dict(node.allocatable))
        status.setdefault("capacity", fmt(dict(node.capacity or node.allocatable)))
    if not status.get("conditions"):
        status["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
    return doc
