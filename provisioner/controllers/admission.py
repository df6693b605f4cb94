"""Admission: lifts the `provisioner.sh/admission` scheduling gate from team pods that quota allows, as
Kueue admits plain pods, and keeps Team and Department `status` current.

Each `reconcile(now)` reads the snapshot, asks `provisioner.quota.admission.decide` which gated pods may
run where, and acts:
- an admitted pod is pinned to its pool (node selector `provisioner.sh/nodepool`, which Kubernetes lets
  a gated pod gain) and its gate removed in the same patch, so kube-scheduler and the provisioner see it
  only once it is bound to that pool; an Event and the pod condition `provisioner.sh/Admitted` say how;
- a pod that must wait keeps its gate, gets an Event and the condition (False) with the reason and the
  numbers, written again only when the reason changes; the condition outlives the Event; with sharded
  replicas it also carries the `provisioner.sh/admission-gated` label while it waits (`gated_label`);
- a preemption within a team evicts the team's own lower-priority pods the same way (Event `Preempted`);
- a reclaim evicts the chosen borrowers through the Eviction API first (PDBs honoured), with an Event
  `Reclaimed` on each; the owner's pod is admitted only when every one is gone. A victim whose eviction
  a PDB blocks is left alone for `reclaim_backoff` (an Event says so once), so a blocked reclaim never
  loops hot; the decision looks for other borrowers meanwhile. The room the evictions that did go
  through freed is held for the pod (no one else is admitted into it) until it is admitted, for
  `reclaim_hold` at most (then an Event `ReclaimTimedOut`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from provisioner.api import labels as wk
from provisioner.api import quantities
from provisioner.clock import isoformat
from provisioner.clusterapi import ClusterError, EvictionBlocked, NotFoundError
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.sharding import unlisted
from provisioner.quota import admission, decisions, status
from provisioner.quota.book import QuotaBook, counted
from provisioner.scheduling import shards
from provisioner.state import Snapshot
from provisioner.state.objects import Pod

log = logging.getLogger(__name__)

RECLAIM_BLOCKED = "waiting for quota to be reclaimed: a PodDisruptionBudget blocks evicting a borrower"
CONDITION = f"{wk.GROUP}/Admitted"
"""Pod condition: True once admitted, False with the reason while the pod waits."""


def _condition_patch(
    pod: Pod, *, admitted: bool, reason: str, message: str, now: datetime
) -> list[dict[str, Any]]:
    """The pod's conditions with ours set; its transition time moves only when its status does."""
    status = "True" if admitted else "False"
    before: dict[str, Any] = next(
        (c for c in (pod.raw.get("status") or {}).get("conditions") or () if c.get("type") == CONDITION), {}
    )
    since = before.get("lastTransitionTime") if before.get("status") == status else None
    return pod.conditions_with(
        {
            "type": CONDITION,
            "status": status,
            "reason": reason,
            "message": message[:1024],
            "lastTransitionTime": since or isoformat(now),
        }
    )


@dataclass(kw_only=True, eq=False)
class AdmissionController(Reconciler):
    reclaim_backoff: timedelta = timedelta(minutes=1)
    """How long a victim whose eviction a PDB blocked is left out of reclaims."""
    reclaim_hold: timedelta = timedelta(minutes=10)
    """How long the room a partly done reclaim freed is held for the pod it was for (no one else is
    admitted into it); past that the hold is dropped, with an Event `ReclaimTimedOut`."""
    _holds: dict[str, tuple[str, datetime]] = field(default_factory=dict, init=False)
    """Pod key -> (pool, until) of the room held for it."""
    last_plan: decisions.AdmissionPlan | None = field(default=None, init=False)
    held: dict[str, tuple[str, list[tuple[str, str]]]] = field(default_factory=dict, init=False)
    """Pod key -> (message, reasons per pool) of every pod waiting now (for `simulate` and reports)."""
    _said: dict[str, str] = field(default_factory=dict, init=False)
    _blocked: dict[str, datetime] = field(default_factory=dict, init=False)
    _blocked_said: set[tuple[str, str]] = field(default_factory=set, init=False)
    """(victim, reclaiming pod) pairs whose ReclaimBlocked Event was recorded: said once, not per retry."""
    _reclaiming: set[str] = field(default_factory=set, init=False)
    """Pods whose reclaim a PDB blocked: they keep that reason (not flipping to "nothing to reclaim" while
    the blocked borrowers are left alone) until admitted."""
    _status: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, init=False)
    counted_namespaces: Callable[[], frozenset[str] | None] = lambda: None
    """Sharded replicas: the namespaces whose every pod the state holds (the holder of quota admission
    watches the namespaces quota counts in, `Sharding.counted_namespaces`), read before the snapshot.
    While a namespace quota counts in is not among them (a Team just created, a namespace just joined
    one: its list has not landed), the pass decides nothing, as its team's use would be undercounted.
    None: the state holds every pod."""
    gated_label: bool = False
    """Sharded replicas: a waiting pod carries `shards.GATED` (put here on one that lacks it, gated by
    hand or while the webhook was down), and loses it when admitted, so whichever replica holds admission
    next watches it, its namespace in a team or not (`provisioner.kube.scopes`)."""
    _gated: tuple[tuple[Pod, ...], list[Pod]] = field(default_factory=lambda: ((), []), init=False)
    """The pending pods last read, and those of them behind the gate: a snapshot hands back the same
    tuple while no pending pod was written, and 10,000 pending pods are not walked again each pass."""

    def reconcile(self, now: datetime) -> decisions.AdmissionPlan | None:
        listed = self.counted_namespaces()  # before the snapshot, which then holds what they listed
        snap = self.state.snapshot()
        if missing := unlisted(listed, snap):
            log.info(
                "admission: the pods of namespaces %s are still being listed; not deciding", sorted(missing)
            )
            return None
        pending, gated = self._gated
        if snap.pending_pods is not pending:
            gated = [p for p in snap.pending_pods if p.gated and not p.deleting]
            self._gated = (snap.pending_pods, gated)
        if not gated and not snap.teams and not snap.departments:
            # Nothing to admit and no one to report on: skip counting every pod of the cluster.
            self.last_plan, self.held = None, {}
            return None
        gated = list(gated)
        book = QuotaBook.of(snap, self.settings.pool_defaults)
        self._blocked = {k: until for k, until in self._blocked.items() if until > now}
        self._drop_late_holds(gated, now)
        plan = admission.decide(
            snap,
            book,
            gated=gated,
            exclude_victims=set(self._blocked),
            held={k: pool for k, (pool, _) in self._holds.items()},
        )
        self.last_plan = plan
        held: dict[str, tuple[str, list[tuple[str, str]]]] = {}
        for admit in plan.admitted:
            if admit.victims and not (reclaimed := self._reclaim(admit, now))[0]:
                self._reclaiming.add(admit.pod.key)
                if admit.pool is not None and reclaimed[1]:
                    self._holds.setdefault(admit.pod.key, (admit.pool, now + self.reclaim_hold))
                self._tell(
                    admit.pod, admitted=False, reason="ReclaimBlocked", message=RECLAIM_BLOCKED, now=now
                )
                held[admit.pod.key] = (RECLAIM_BLOCKED, [(admit.pool or "-", RECLAIM_BLOCKED)])
                continue
            self._reclaiming.discard(admit.pod.key)
            self._holds.pop(admit.pod.key, None)
            self._admit(admit, now)
        for hold in plan.held:
            if self.gated_label and shards.GATED not in hold.pod.labels:
                self._label_gated(hold.pod)
            if hold.pod.key in self._reclaiming and not hold.never:
                held[hold.pod.key] = (RECLAIM_BLOCKED, [(pool, RECLAIM_BLOCKED) for pool, _ in hold.reasons])
                continue
            reason = "QuotaNeverFits" if hold.never else "QuotaExceeded"
            self._tell(hold.pod, admitted=False, reason=reason, message=hold.message, now=now)
            held[hold.pod.key] = (hold.message, [(pool, f"{hold.head}: {why}") for pool, why in hold.reasons])
        self.held = held
        waiting: dict[str, int] = {name: 0 for name in book.teams}
        for hold in plan.held:
            waiting[hold.team] = waiting.get(hold.team, 0) + 1
        for name, count in waiting.items():
            self.metrics.pods_waiting_for_quota.labels(team=name).set(count)
        live = {p.key for p in gated}
        self._said = {k: v for k, v in self._said.items() if k in live}
        self._blocked_said = {(v, r) for v, r in self._blocked_said if r in live}
        self._reclaiming &= live
        self._write_status(snap, book, plan)
        return plan

    def _drop_late_holds(self, gated: list[Pod], now: datetime) -> None:
        """Holds of pods gone or admitted go; a hold past `reclaim_hold` goes with an Event."""
        live = {p.key: p for p in gated}
        for key, (pool, until) in list(self._holds.items()):
            pod = live.get(key)
            if pod is None:
                del self._holds[key]
            elif until <= now:
                del self._holds[key]
                self.cluster.record_event(
                    kind="Pod",
                    name=pod.name,
                    namespace=pod.namespace,
                    reason="ReclaimTimedOut",
                    message=f"the room freed on {pool} by reclaiming for this pod was held "
                    f"{int(self.reclaim_hold.total_seconds())}s, but the rest of its reclaim is still "
                    "blocked: the room is let go (others may be admitted into it); the reclaim goes on",
                    type="Warning",
                )

    def _admit(self, admit: decisions.Admit, now: datetime) -> None:
        pod = admit.pod
        gates = [
            g
            for g in (pod.raw.get("spec") or {}).get("schedulingGates") or ()
            if g.get("name") != wk.ADMISSION_GATE
        ]
        spec: dict[str, Any] = {"schedulingGates": gates}
        if admit.pool is not None:
            spec["nodeSelector"] = {wk.NODEPOOL: admit.pool}
        patch: dict[str, Any] = {"spec": spec}
        if shards.GATED in pod.labels:
            patch["metadata"] = {"labels": {shards.GATED: None}}
        try:
            # No resourceVersion guard: gates can only be removed after creation, so a list computed from a
            # stale read can only name a gate someone removed since, which the API server refuses (422).
            self.cluster.patch_pod(pod.namespace, pod.name, patch)
        except ClusterError as err:
            log.warning("could not admit pod %s: %s; trying again next pass", pod.key, err)
            return
        try:
            self.cluster.patch_pod_status(
                pod.namespace,
                pod.name,
                {
                    "conditions": _condition_patch(
                        pod,
                        admitted=True,
                        reason="AdmittedOverQuota" if admit.over_quota else "Admitted",
                        message=admit.message,
                        now=now,
                    )
                },
            )
        except ClusterError as err:
            log.warning("could not write the admission condition of pod %s: %s", pod.key, err)
        self._said.pop(pod.key, None)
        how = "unmanaged" if admit.pool is None else "over-quota" if admit.over_quota else "in-quota"
        self.metrics.pods_admitted.labels(team=admit.team or "", how=how).inc()
        self.cluster.record_event(
            kind="Pod", name=pod.name, namespace=pod.namespace, reason="Admitted", message=admit.message
        )

    def _label_gated(self, pod: Pod) -> None:
        try:
            self.cluster.patch_pod(pod.namespace, pod.name, {"metadata": {"labels": {shards.GATED: "true"}}})
        except ClusterError as err:
            log.warning("could not label waiting pod %s %s: %s", pod.key, shards.GATED, err)

    def _tell(self, pod: Pod, *, admitted: bool, reason: str, message: str, now: datetime) -> None:
        """Event and condition for a waiting pod, only when what there is to say changed."""
        if self._said.get(pod.key) == message:
            return
        self._said[pod.key] = message
        self.cluster.record_event(
            kind="Pod", name=pod.name, namespace=pod.namespace, reason=reason, message=message, type="Warning"
        )
        try:
            self.cluster.patch_pod_status(
                pod.namespace,
                pod.name,
                {
                    "conditions": _condition_patch(
                        pod, admitted=admitted, reason=reason, message=message, now=now
                    )
                },
            )
        except ClusterError as err:
            log.warning("could not write the admission condition of pod %s: %s", pod.key, err)

    def _reclaim(self, admit: decisions.Admit, now: datetime) -> tuple[bool, int]:
        """Evict every victim: whether all are gone (or going), and how many went now."""
        done = True
        evicted = 0
        for victim in admit.victims:
            freed = ", ".join(
                f"{r} {quantities.format_quantity(r, a)}" for r, a in sorted(counted(victim.requests).items())
            )
            try:
                self.cluster.evict_pod(victim.namespace, victim.name)
            except NotFoundError:
                continue
            except EvictionBlocked as err:
                self.metrics.reclaims.labels(result="blocked").inc()
                done = False
                self._blocked[victim.key] = now + self.reclaim_backoff
                if (victim.key, admit.pod.key) in self._blocked_said:
                    continue
                self._blocked_said.add((victim.key, admit.pod.key))
                self.cluster.record_event(
                    kind="Pod",
                    name=victim.name,
                    namespace=victim.namespace,
                    reason="ReclaimBlocked",
                    message=f"team {admit.team} needs {freed} back on {admit.pool} for pod {admit.pod.key}, "
                    f"but {err}; retrying every {int(self.reclaim_backoff.total_seconds())}s",
                    type="Warning",
                )
                continue
            except ClusterError as err:
                log.warning("could not evict %s for a reclaim: %s", victim.key, err)
                done = False
                continue
            self.metrics.reclaims.labels(result="evicted").inc()
            evicted += 1
            if victim in admit.preempted:
                reason, message = (
                    "Preempted",
                    f"preempted within team {admit.team} on {admit.pool}: frees {freed} for pod "
                    f"{admit.pod.key} (priority {admit.pod.priority}, this pod {victim.priority}"
                    f"{', preemptible' if victim.preemptible else ''})",
                )
            else:
                reason, message = (
                    "Reclaimed",
                    f"reclaimed by team {admit.team} on {admit.pool}: frees {freed} for pod {admit.pod.key} "
                    "(this pod ran over its team's quota)",
                )
            self.cluster.record_event(
                kind="Pod",
                name=victim.name,
                namespace=victim.namespace,
                reason=reason,
                message=message,
                type="Warning",
            )
        return done, evicted

    def _write_status(self, snap: Snapshot, book: QuotaBook, plan: decisions.AdmissionPlan) -> None:
        for kind, name, doc in status.documents(book, plan):
            if self._status.get((kind, name)) == doc:
                continue
            try:
                self.cluster.patch_quota_status(kind, name, doc)
            except ClusterError as err:
                log.warning("could not write the status of %s %s: %s", kind, name, err)
                continue
            self._status[(kind, name)] = doc
        known = {("Team", t.name) for t in snap.teams} | {("Department", d.name) for d in snap.departments}
        self._status = {k: v for k, v in self._status.items() if k in known}
