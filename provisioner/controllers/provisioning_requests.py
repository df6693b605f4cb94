"""ProvisioningRequests (autoscaling.x-k8s.io/v1): capacity for a set of pods, checked or launched all at
once, the outcome in the conditions Kueue's ProvisioningRequest admission check reads.

For each request of a class we serve (`check-capacity.autoscaling.x-k8s.io`,
`best-effort-atomic-scale-up.autoscaling.x-k8s.io`; any other is left to its own autoscaler):
- `Accepted=True` once seen; `Failed=True` (terminal) when a PodTemplate it names is missing, or the
  atomic class's `ValidUntilSeconds` passed before its capacity was there.
- Its pods (`state.provisioning_requests.request_pods`: its templates times counts, less the real pods
  that consume it) are sized by a solve over the cluster as it is. When they all fit on registered nodes:
  `Provisioned=True` (check-capacity: `CapacityIsFound`). Else check-capacity says `Provisioned=False,
  CapacityIsNotFound` (or `Failed` with `noRetry: "true"`), and the atomic class books them: they join the
  provisioning controller's solves as one gang, whose nodes launch together or not at all
  (`Provisioned=False` says why meanwhile, with the gang's reason). Before booking, the pods pass team
  quota as a unit (`provisioner.quota.admission`, gangs admitted whole): when any of them would wait for
  quota, nothing is booked or launched and `Provisioned=False, QuotaExceeded` says which quota, so no
  team is billed for capacity beyond its quota through a request.
- Booked capacity is kept for `BOOKING_TIME` after `Provisioned` (the booked pods stay in the solves, so
  no other pod takes the room); then `BookingExpired=True` if real pods have not taken it all. When booked
  capacity goes (a node interrupted or removed) before its pods took it: `CapacityRevoked=True`.
When replicas share the pools (`provisioner run --shards`), every replica runs this controller on the
requests whose pods its pools take first (`decides`: the replica that launches them, by the rule their
pods follow), over its part of the cluster; a request whose templates are missing is the quota admission
holder's. The team quota of a request's pods stays that holder's one decision: it writes its word on the
request (`RequestQuota`, `pr.QUOTA_ANNOTATION`), and the deciding replica reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from provisioner import scheduling
from provisioner.api import durations
from provisioner.api import labels as wk
from provisioner.api import nodepool as nodepool_api
from provisioner.api import provisioning_request as pr
from provisioner.api.common import Condition, ConditionStatus
from provisioner.clusterapi import ClusterError
from provisioner.controllers.conditions import set_condition
from provisioner.controllers.provider_set import pool_instance_types
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.sharding import unlisted
from provisioner.quota import admission
from provisioner.quota.book import QuotaBook
from provisioner.scheduling.results import GangOutcome
from provisioner.state import Snapshot
from provisioner.state import provisioning_requests as requests_
from provisioner.state.objects import Pod

log = logging.getLogger(__name__)

BOOKING_TIME = timedelta(minutes=10)
"""How long capacity stays booked for a request once Provisioned (Cluster Autoscaler's default)."""

Update = tuple[str, bool, str, str]
"""(condition type, status, reason, message)."""


@dataclass(kw_only=True, eq=False)
class ProvisioningRequestController(Reconciler):
    solve: scheduling.SolveFn = scheduling.solve
    gang_outcome: Callable[[str], GangOutcome | None] = lambda _name: None
    """The provisioning controller's last word on a gang, for the reason of a request not yet Provisioned."""
    decides: Callable[[Sequence[Pod]], bool] | None = None
    """Sharded: whether this replica decides the request whose pods (from its templates; none when one
    is missing) are these, the replica their pool lists route them to first. None: every request."""
    quota_by_annotation: bool = False
    """Sharded: a team's quota on a request is the admission holder's word (`pr.QUOTA_ANNOTATION`)."""
    booked: list[Pod] = field(default_factory=list, init=False)
    """The pods of the requests whose capacity is booked or being launched, for the provisioning solve."""

    def booked_pods(self) -> Sequence[Pod]:
        return self.booked

    def reconcile(self, now: datetime) -> None:
        with self.state.lock:
            requests = sorted(self.state.provisioning_requests.values(), key=lambda r: r.key)
            # Read only when there is a request: a copy of every pod costs a large cluster every pass.
            templates = dict(self.state.pod_templates) if requests else {}
            pods = list(self.state.pods.values()) if requests else []
        booked: list[Pod] = []
        held: list[Pod] = []
        if not requests:
            self.booked = booked
            return
        snap = self.state.snapshot()
        for request in requests:
            if request.spec.provisioning_class_name not in pr.CLASSES:
                continue
            if self.decides is not None and not self.decides(_pods_of(request, templates)):
                continue
            updates = self._decide(request, snap, templates, pods, now, booked=booked, held=held)
            try:
                self._write(request, updates, now)
            except ClusterError as err:
                log.warning("ProvisioningRequest %s: %s", request.key, err)
        self.booked = booked

    def _decide(
        self,
        request: pr.ProvisioningRequest,
        snap: Snapshot,
        templates: dict[str, Any],
        pods: list[Pod],
        now: datetime,
        *,
        booked: list[Pod],
        held: list[Pod],
    ) -> list[Update]:
        """The conditions to set; adds the request's pods to `booked` (solved by provisioning: launched or
        kept) and to `held` (room the requests after it must leave alone)."""
        status = {c.type: c for c in request.status.conditions}

        def true(type_: str) -> bool:
            c = status.get(type_)
            return c is not None and c.status == ConditionStatus.TRUE

        updates: list[Update] = []
        if not true(pr.ACCEPTED):
            updates.append((pr.ACCEPTED, True, "Accepted", "the provisioner will provision its capacity"))
        if any(true(t) for t in (pr.FAILED, pr.BOOKING_EXPIRED, pr.CAPACITY_REVOKED)):
            return updates  # terminal: Kueue makes a new request to try again
        missing = requests_.missing_templates(request, templates)
        if missing:
            what = ", ".join(missing)
            return [*updates, (pr.FAILED, True, "PodTemplateNotFound", f"PodTemplate {what} not found")]
        taken = requests_.consumers(request, pods)
        mine = requests_.request_pods(request, templates, consumed=len(taken))
        atomic = request.spec.provisioning_class_name == pr.BEST_EFFORT_ATOMIC_SCALE_UP
        if true(pr.PROVISIONED):
            since = status[pr.PROVISIONED].last_transition_time or now
            if not mine:
                return updates  # every pod it was for has come
            if now - since >= BOOKING_TIME:
                message = (
                    f"{len(mine)} of its {request.total} pods did not come within "
                    f"{durations.format_duration(BOOKING_TIME)} of Provisioned"
                )
                return [*updates, (pr.BOOKING_EXPIRED, True, "BookingExpired", message)]
            if atomic:
                fits, detail = self._fits(mine, snap, others=held)
                if not fits:
                    return [*updates, (pr.CAPACITY_REVOKED, True, "CapacityRevoked", detail)]
                booked.extend(mine)
            held.extend(mine)
            return updates
        fits, detail = self._fits(mine, snap, others=held)
        if fits:
            held.extend(mine)
        if not atomic:
            if fits:
                return [*updates, (pr.PROVISIONED, True, "CapacityIsFound", detail)]
            if request.spec.parameters.get("noRetry", "").lower() == "true":
                return [*updates, (pr.FAILED, True, "CapacityIsNotFound", detail)]
            return [*updates, (pr.PROVISIONED, False, "CapacityIsNotFound", detail)]
        if fits:
            booked.extend(mine)
            return [*updates, (pr.PROVISIONED, True, "Provisioned", detail)]
        valid = request.spec.parameters.get(pr.VALID_UNTIL_SECONDS)
        created = request.metadata.creation_timestamp
        if (
            valid
            and valid.isdigit()
            and created is not None
            and now - created >= timedelta(seconds=int(valid))
        ):
            return [
                *updates,
                (pr.FAILED, True, "ValidUntilExpired", f"not provisioned within {valid}s; {detail}"),
            ]
        held_by_quota = self._quota(request, mine, snap)
        if held_by_quota is not None:
            return [*updates, (pr.PROVISIONED, False, *held_by_quota)]
        booked.extend(mine)
        held.extend(mine)
        outcome = self.gang_outcome(requests_.gang_name(request))
        if outcome is not None and outcome.state != "Placed":
            return [*updates, (pr.PROVISIONED, False, "CapacityIsNotFound", outcome.reason)]
        return [*updates, (pr.PROVISIONED, False, "Provisioning", "launching its nodes, all at once")]

    def _quota(
        self, request: pr.ProvisioningRequest, pods: list[Pod], snap: Snapshot
    ) -> tuple[str, str] | None:
        """Why (reason, message) the request's pods may not be booked yet for their team's quota, or None
        when they may (or belong to no team)."""
        if not snap.teams or not pods:
            return None
        book = QuotaBook.of(snap, self.settings.pool_defaults)
        if not self.quota_by_annotation:
            over = over_quota(pods, snap, book)
            return None if over is None else ("QuotaExceeded", over)
        if book.team_of(request.namespace) is None:
            return None
        word = request.metadata.annotations.get(pr.QUOTA_ANNOTATION)
        if word == pr.QUOTA_ADMITTED:
            return None
        if word is None:
            return "QuotaPending", "waiting for the replica holding quota admission to admit its pods"
        return "QuotaExceeded", word

    def _fits(self, pods: list[Pod], snap: Snapshot, *, others: Sequence[Pod] = ()) -> tuple[bool, str]:
        """Whether the pods all fit on registered nodes now, beside `others` (the pods of requests booked
        before this one, which keep their room), and where (or why not)."""
        if not pods:
            return True, "every pod it was for is running"
        pools = nodepool_api.live(snap.nodepools)
        results = self.solve(
            [*others, *pods],
            snap,
            pools=pools,
            instance_types=pool_instance_types(self.providers, snap, pools),
        )
        mine = {p.key for p in pods}
        zones: set[str] = set()
        placed = 0
        for placement in results.placements:
            if placement.pod.key not in mine:
                continue
            node = snap.node(placement.node)
            if node is None or node.node is None:
                break  # room on a claim still launching is not capacity yet
            placed += 1
            zones.update(z for z in [node.labels.get(wk.ZONE)] if z)
        if placed == len(pods):
            where = f" in {', '.join(sorted(zones))}" if zones else ""
            return True, f"capacity for its {len(pods)} pods is in the cluster{where}"
        why = next((u.reasons for u in results.unschedulable if u.pod.key in mine), [])
        reason = "; ".join(f"{r.nodepool}: {r.reason}" if r.nodepool else r.reason for r in why)
        return False, reason or f"{len(pods)} pods need {len(results.new_claims)} new nodes"

    def _write(self, request: pr.ProvisioningRequest, updates: list[Update], now: datetime) -> None:
        current = {c.type: c for c in request.status.conditions}
        changed = [
            u
            for u in updates
            if (c := current.get(u[0])) is None
            or c.status.value != ("True" if u[1] else "False")
            or c.reason != u[2]
            or c.message != u[3]
        ]
        if not changed:
            return
        conditions = list(request.status.conditions)
        out: list[dict[str, Any]] = []
        for type_, status, reason, message in changed:
            out = set_condition(conditions, type_, status, reason=reason, message=message, now=now)
            conditions = [Condition.model_validate(d) for d in out]
        self.cluster.patch_provisioning_request_status(request.namespace, request.name, {"conditions": out})
        for type_, status, reason, message in changed:
            if type_ != pr.ACCEPTED:
                self.cluster.record_event(
                    kind="ProvisioningRequest",
                    name=request.name,
                    namespace=request.namespace,
                    reason=reason,
                    message=message,
                    type="Warning"
                    if (status and type_ != pr.PROVISIONED) or reason == "CapacityIsNotFound"
                    else "Normal",
                )


def _pods_of(request: pr.ProvisioningRequest, templates: dict[str, Any]) -> list[Pod]:
    """The request's pods, or none when a PodTemplate it names is missing."""
    if requests_.missing_templates(request, templates):
        return []
    return requests_.request_pods(request, templates, consumed=0)


def over_quota(pods: list[Pod], snap: Snapshot, book: QuotaBook) -> str | None:
    """Why the request's pods may not all be admitted by their team's quota now (as one gang: all or
    none), or None when they may (or belong to no team)."""
    plan = admission.decide(snap, book, gated=pods)
    if not plan.held:
        return None
    first = plan.held[0]
    return f"{len(plan.held)} of its {len(pods)} pods wait for quota of team {first.team}: {first.message}"


@dataclass(kw_only=True, eq=False)
class RequestQuota(Reconciler):
    """Sharded replicas only, run by the one holding quota admission over the whole cluster: its word on
    each atomic request of a team's namespace still to be provisioned (`pr.QUOTA_ANNOTATION`), which the
    replica provisioning the request reads before it books anything."""

    counted_namespaces: Callable[[], frozenset[str] | None] = lambda: None
    """The namespaces whose every pod the state holds, read before the snapshot (as
    `AdmissionController.counted_namespaces`): no word is given while a team's is still being listed."""

    def reconcile(self, now: datetime) -> None:
        listed = self.counted_namespaces()
        with self.state.lock:
            requests = sorted(self.state.provisioning_requests.values(), key=lambda r: r.key)
            if not requests:
                return
            templates = dict(self.state.pod_templates)
            pods = list(self.state.pods.values())
        snap = self.state.snapshot()
        if not snap.teams or unlisted(listed, snap):
            return
        book = QuotaBook.of(snap, self.settings.pool_defaults)
        for request in requests:
            if (
                request.spec.provisioning_class_name != pr.BEST_EFFORT_ATOMIC_SCALE_UP
                or book.team_of(request.namespace) is None
                or requests_.missing_templates(request, templates)
                or any(
                    c.status == ConditionStatus.TRUE for c in request.status.conditions if c.type in _SETTLED
                )
            ):
                continue
            taken = requests_.consumers(request, pods)
            mine = requests_.request_pods(request, templates, consumed=len(taken))
            word = over_quota(mine, snap, book) or pr.QUOTA_ADMITTED
            if request.metadata.annotations.get(pr.QUOTA_ANNOTATION) == word:
                continue
            try:
                self.cluster.patch_provisioning_request(
                    request.namespace,
                    request.name,
                    {"metadata": {"annotations": {pr.QUOTA_ANNOTATION: word}}},
                )
            except ClusterError as err:
                log.warning("ProvisioningRequest %s: cannot write its quota word: %s", request.key, err)


_SETTLED = (pr.PROVISIONED, pr.FAILED, pr.BOOKING_EXPIRED, pr.CAPACITY_REVOKED)
"""Conditions after which a request's quota is no longer asked: it is provisioned, or over."""
