"""Provisioning: pods the scheduler could not place -> a batch -> `scheduling.solve` -> NodeClaims.

Level-triggered: each `reconcile(now)` looks at the cluster state as it is. A batch opens when the set of
pods needing capacity changes, and closes after `batch_idle` without change or `batch_max` in all. Pods on
nodes being deleted are solved with the pending ones (their replacement is launched before they are
evicted, within the pool's limits, which still count the node being deleted). Claims are written with the
termination finalizer, the pool label and the engine's options; the scheduler counts a claim in flight as
capacity of its first option, so the next solve places the same pods on it and never launches twice for
them. Pods no pool can take get one Event with the reason
per pool, repeated only when the reasons change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from operator import attrgetter

from provisioner import scheduling
from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.api import nodepool as nodepool_api
from provisioner.clusterapi import ClusterError
from provisioner.controllers.claims import build_nodeclaim
from provisioner.controllers.provider_set import pool_instance_types
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.watch import Watch
from provisioner.scheduling import NewClaim, Results, SolveFn, SolveOptions, Unschedulable
from provisioner.state import Snapshot, StateNode
from provisioner.state.objects import Pod
from provisioner.state.provisioning_requests import is_booking_pod

log = logging.getLogger(__name__)

_KEY = attrgetter("key")


def pods_needing_capacity(snap: Snapshot) -> list[Pod]:
    """Pending pods kube-scheduler marked Unschedulable, plus the pods on nodes being deleted that will
    need a node again: the active ones, and a terminating one a StatefulSet owns (its replacement, same
    name, is made only once it is gone; Karpenter's "should reschedule pods from a deleting node when
    pods are not active and they are owned by a StatefulSet"). A pod still behind the admission gate is
    never among them: quota has not let it run yet."""
    out = [
        p
        for p in snap.pending_pods
        if p.unschedulable and not p.deleting and not p.is_daemonset_pod and not p.is_terminal and not p.gated
    ]
    for node in snap.nodes:
        if node.deleting:
            out.extend(
                p
                for p in node.pods
                if not p.is_daemonset_pod
                and (not p.deleting or p.owner_kind == "StatefulSet")
                and not p.is_terminal
            )
    return out


@dataclass(kw_only=True, eq=False)
class ProvisioningController(Reconciler):
    solve: SolveFn = scheduling.solve
    solve_options: SolveOptions | None = None
    booked: Callable[[], Sequence[Pod]] = tuple
    """The pods of ProvisioningRequests being provisioned or holding booked capacity (never in the
    cluster): solved with the pending pods, so their nodes launch and stay theirs."""
    pass_on: Callable[[Sequence[Unschedulable], datetime], None] | None = None
    """Sharded replicas: told the pods this solve could not place (`controllers.sharding`)."""
    batches: int = field(default=0, init=False)
    last_results: Results | None = field(default=None, init=False)
    _seen: frozenset[str] | None = field(default=None, init=False)
    _solved: frozenset[str] | None = field(default=None, init=False)
    _window_start: datetime | None = field(default=None, init=False)
    _last_change: datetime | None = field(default=None, init=False)
    _forced: bool = field(default=False, init=False)
    _pod_messages: dict[str, str] = field(default_factory=dict, init=False)
    _nominated: dict[str, str] = field(default_factory=dict, init=False)
    _failed_writes: int = field(default=0, init=False)
    _watch: Watch = field(init=False)
    _claim_keys: tuple[tuple[StateNode, ...], frozenset[str]] | None = field(default=None, init=False)
    """The nodes of the last signature's snapshot, and its claims' part (`_signature`)."""
    _idle: bool = field(default=False, init=False)
    """The last pass found no pod needing capacity: while no pod, Node or claim is written, none does."""

    def __post_init__(self) -> None:
        self._watch = Watch(self.state, ("Pod", "Node", "NodeClaim"), owns=self.owns)

    def trigger(self) -> None:
        """Solve at the next reconcile, without waiting for the batch window (interruptions)."""
        self._forced = True

    def _signature(self, snap: Snapshot, pods: Sequence[Pod], now: datetime) -> frozenset[str]:
        # What a solve depends on that changes often: the pods, the claims they may land on, and the
        # offerings held back by stockouts and quotas (when one runs out, pods left unschedulable by it
        # must be solved again, even though no pod or claim moved). Made at every pass while pods
        # arrive: one set built from the keys (no set per part copied into it), the claims' part again
        # only when the snapshot's nodes changed (the same tuple while no Node or claim was written).
        last = self._claim_keys
        if last is None or last[0] is not snap.nodes:
            claims = frozenset(
                f"claim:{n.claim.name}" for n in snap.nodes if n.claim is not None and not n.deleting
            )
            self._claim_keys = last = (snap.nodes, claims)
        return frozenset().union(map(_KEY, pods), last[1], self.providers.unavailable_offerings(now))

    def reconcile(self, now: datetime) -> Results | None:
        written = self._watch.take()
        booked = self.booked()
        if self._idle and not written and not booked and not self._forced:
            return None
        snap = self.state.snapshot()
        pods = pods_needing_capacity(snap)
        self.metrics.pending_pods.set(len(pods))
        self._idle = not pods
        pods += booked
        if not pods:
            self._window_start = self._last_change = None
            self._seen = None
            self._forget_pods(set())
            return None
        sig = self._signature(snap, pods, now)
        if sig != self._seen:
            self._seen = sig
            self._last_change = now
            if self._window_start is None:
                self._window_start = now
        if sig == self._solved and not self._forced:
            self._window_start = None
            return None
        assert self._last_change is not None and self._window_start is not None
        due = (
            self._forced
            or now - self._last_change >= self.settings.batch_idle
            or now - self._window_start >= self.settings.batch_max
        )
        if not due:
            return None
        self._forced = False
        self._window_start = None
        self._failed_writes = 0
        results = self._solve(snap, pods, now)
        after = self.state.snapshot()
        if self._failed_writes:
            # Some claims were not written: solve again after the idle window, even if nothing moved.
            self._solved = None
            self._seen = None
        else:
            # Only the pods this batch solved: one that arrived while it was solving opens the next batch
            # (counted as solved, it would wait for some other change).
            batch = {p.key for p in pods}
            solved = [p for p in [*pods_needing_capacity(after), *self.booked()] if p.key in batch]
            self._solved = self._signature(after, solved, now)
            self._seen = self._solved
        return results

    def _solve(self, snap: Snapshot, pods: list[Pod], now: datetime) -> Results:
        pools = nodepool_api.live(snap.nodepools)
        instance_types = pool_instance_types(self.providers, snap, pools)
        started = time.perf_counter()
        # The snapshot goes as it is: scheduling.existing owns how its nodes count (a deleting node still
        # counts toward its pool's limits, takes no pods; a registering node counts as what it will be).
        results = self.solve(
            pods,
            snap,
            pools=pools,
            instance_types=instance_types,
            daemonsets=snap.daemonsets,
            options=self._options(),
        )
        self.metrics.solve_seconds.observe(time.perf_counter() - started)
        self.metrics.batch_size.observe(len(pods))
        self.batches += 1
        self.last_results = results
        log.info(
            "batch of %d pods: %d placed on existing or in-flight capacity, %d new claims, %d unschedulable",
            len(pods),
            len(results.placements),
            len(results.new_claims),
            len(results.unschedulable),
        )
        # Every claim first, then the Events: a claim is capacity on its way, an Event only says so, and
        # one Event per pod written between the claims (or sent alongside them, by a background writer)
        # would hold the last claim back by most of the batch.
        claims = [
            (new, build_nodeclaim(new, snap, suffix=self.settings.name_suffix()))
            for new in results.new_claims
        ]
        written = self._write_claims(claims)
        self._failed_writes += written.count(False)
        for (new, claim), ok in zip(claims, written, strict=True):
            if ok:
                self._nominate([p for p in new.pods if not is_booking_pod(p)], claim.name)
        # A ProvisioningRequest's pods are not in the cluster: the request's conditions say why instead.
        unschedulable = [u for u in results.unschedulable if not is_booking_pod(u.pod)]
        self._events_for_unschedulable(unschedulable, {p.key for p in pods})
        if self.pass_on is not None:
            self.pass_on(unschedulable, now)
        return results

    def _options(self) -> SolveOptions:
        """The solve's options, with the cluster's default pools from the settings."""
        base = self.solve_options if self.solve_options is not None else SolveOptions()
        return replace(base, pool_defaults=self.settings.pool_defaults)

    def _write_claims(self, claims: Sequence[tuple[NewClaim, NodeClaim]]) -> list[bool]:
        """Whether each claim was written: `settings.claim_writers` at a time, in order when 1."""
        writers = min(self.settings.claim_writers, len(claims))
        if writers <= 1:
            return [self._create_claim(new, claim) for new, claim in claims]
        with ThreadPoolExecutor(writers, thread_name_prefix="claims") as pool:
            return list(pool.map(lambda c: self._create_claim(*c), claims))

    def _create_claim(self, new: NewClaim, claim: NodeClaim) -> bool:
        name = claim.name
        try:
            self.cluster.create_nodeclaim(claim)
        except ClusterError as err:
            log.warning("could not create NodeClaim %s: %s; the batch will be solved again", name, err)
            return False
        self.metrics.nodeclaims_created.labels(nodepool=new.nodepool.name).inc()
        options = ", ".join(t.name for t in new.instance_types[:5])
        log.info(
            "created NodeClaim %s in pool %s for %d pods (options %s%s; planned %s at $%.4f/h)",
            name,
            new.nodepool.name,
            len(new.pods),
            options,
            "..." if len(new.instance_types) > 5 else "",
            claim.metadata.annotations[wk.PLANNED_OFFERING],
            new.price,
        )
        return True

    def _nominate(self, pods: Sequence[Pod], name: str) -> None:
        for pod in pods:
            if self._nominated.get(pod.key) == name:
                continue
            self._nominated[pod.key] = name
            self.cluster.record_event(
                kind="Pod",
                name=pod.name,
                namespace=pod.namespace,
                reason="Nominated",
                message=f"Pod should schedule on: nodeclaim/{name}",
            )

    def _events_for_unschedulable(self, unschedulable: Sequence[Unschedulable], current: set[str]) -> None:
        for u in unschedulable:
            if u.pod.invalid:
                message = f"cannot provision for this pod: {u.pod.invalid}"
            else:
                reasons = "; ".join(f"{r.nodepool}: {r.reason}" for r in u.reasons) or "no NodePool exists"
                message = f"no NodePool can take this pod: {reasons}"
            if self._pod_messages.get(u.pod.key) == message:
                continue
            self._pod_messages[u.pod.key] = message
            self.cluster.record_event(
                kind="Pod",
                name=u.pod.name,
                namespace=u.pod.namespace,
                reason="InvalidPod" if u.pod.invalid else "FailedProvisioning",
                message=message,
                type="Warning",
            )
        self._forget_pods(current)

    def _forget_pods(self, current: set[str]) -> None:
        for key in [k for k in self._pod_messages if k not in current]:
            del self._pod_messages[key]
        for key in [k for k in self._nominated if k not in current]:
            del self._nominated[key]
