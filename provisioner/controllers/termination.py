"""Termination: the finalizer of a deleted NodeClaim.

Steps, each resumable after a crash: taint the Node `provisioner.sh/disrupted:NoSchedule`; drain it
through the Eviction API (a PDB's 429 means try again later; pods with `provisioner.sh/do-not-disrupt`
block a voluntary disruption; once `terminationGracePeriod` has passed since the drain began, or for an
expired claim since its expiry, pods are deleted regardless); `provider.delete`; wait until the instance
is gone; delete the Node; hand in the ledger rows the claim carries and wait until they are stored; remove
the finalizer. DaemonSet pods are not evicted: they go with the node.

Writes to a list (the finalizers, the taints) are guarded by the resourceVersion they were computed
from; a conflict is retried once on the object read afresh from the server, and a second one is left to
the next reconcile without a warning (Karpenter's controllers requeue on conflicts the same way).

The ledger rows (annotation `provisioner.sh/ledger-actions`, written by disruption just before it deleted
the claim) are what make a disruption's row survive a crash: whichever process removes the finalizer
hands them in (the recorder and the ledger skip rows they already have) and removes it only once they are
committed. A ledger that stays down does not hold a node forever: after `ledger_hold` since the deletion
the finalizer goes anyway and the rows wait in the recorder's queue (lost only if the process then dies
before the database is back)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from provisioner.api import NodeClaim, durations
from provisioner.api import labels as wk
from provisioner.api.nodeclaim import DRAINING
from provisioner.api.nodepool import DisruptionReason
from provisioner.cloudprovider import CloudProviderError, NotFound
from provisioner.clusterapi import (
    ClusterError,
    ConflictError,
    EvictionBlocked,
    NotFoundError,
    guarded,
    node_rv,
)
from provisioner.controllers.conditions import condition_time, set_condition
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.watch import Watch
from provisioner.disruption.candidates import do_not_disrupt
from provisioner.finops.recorder import LedgerRecorder
from provisioner.finops.rows import actions_from_json
from provisioner.state.objects import Node, Pod

log = logging.getLogger(__name__)

INVOLUNTARY = frozenset(
    {"Interrupted", "Unregistered", "NotInitialized", "InstanceGone", "LaunchFailed", "Unhealthy"}
)
"""Disruption reasons that do not respect do-not-disrupt (the node is going or never worked)."""


def _expiry(claim: NodeClaim) -> datetime | None:
    """When a claim deleted for expiration expired (creation + expireAfter); None for other deletions."""
    if claim.metadata.annotations.get(wk.DISRUPTION_REASON) != DisruptionReason.EXPIRED.value:
        return None
    lasts = durations.parse_duration(claim.spec.expire_after) if claim.spec.expire_after else None
    born = claim.metadata.creation_timestamp
    if lasts is None or born is None:
        return None
    return (born if born.tzinfo is not None else born.replace(tzinfo=UTC)) + lasts


@dataclass(kw_only=True, eq=False)
class TerminationController(Reconciler):
    recorder: LedgerRecorder | None = None
    """The ledger recorder; None keeps no ledger."""
    _ledger_said: set[str] = field(default_factory=set, init=False)
    _blocked_said: dict[str, str] = field(default_factory=dict, init=False)
    _retry_at: dict[str, datetime] = field(default_factory=dict, init=False)

    _watch: Watch = field(init=False)
    _busy: bool = field(default=True, init=False)
    """The last pass had a claim to terminate: the next one looks again, written or not (a drain and
    the cloud's deletion move without a write to a claim)."""

    def __post_init__(self) -> None:
        self._watch = Watch(self.state, ("NodeClaim",), owns=self.owns)

    def reconcile(self, now: datetime) -> None:
        # No claim deleting last pass and none written since: none is deleting now.
        if not self._watch.take() and not self._busy:
            return
        snap = self.state.snapshot()
        self._busy = False
        for sn in snap.nodes:
            claim = sn.claim
            if claim is None or claim.metadata.deletion_timestamp is None:
                continue
            if wk.TERMINATION_FINALIZER not in claim.metadata.finalizers:
                continue
            self._busy = True
            try:
                self._terminate(claim, sn.node, list(sn.pods), now)
            except NotFoundError:
                continue
            except ConflictError as err:
                # Someone wrote the object between our read and our write, twice: the next reconcile
                # works from the newer copy. Routine on a busy cluster, not worth a warning.
                log.info("terminating NodeClaim %s: %s; will retry", claim.name, err)
            except ClusterError as err:
                log.warning("terminating NodeClaim %s: %s", claim.name, err)

    def _terminate(self, claim: NodeClaim, node: Node | None, pods: list[Pod], now: datetime) -> None:
        if node is not None and not node.deleting and not self._drained(claim, node, pods, now):
            return
        provider = self.providers.for_claim(claim)
        provider_id = claim.status.provider_id
        if provider is not None and not provider_id:
            # A launch may have succeeded before its status was written: find it by its claim tag.
            try:
                provider_id = next(
                    (i.provider_id for i in provider.list() if i.nodeclaim == claim.name), None
                )
            except CloudProviderError as err:
                log.warning("NodeClaim %s: cannot list instances: %s", claim.name, err)
                return
        if provider is not None and provider_id:
            try:
                instance = provider.get(provider_id)
                if instance.state not in ("terminated",):
                    if instance.state not in ("shutting-down", "stopping", "terminating"):
                        provider.delete(provider_id)
                        log.info("NodeClaim %s: terminating instance %s", claim.name, provider_id)
                    # Wait for the cloud to confirm; the next reconcile looks again.
                    try:
                        still = provider.get(provider_id)
                        if still.state != "terminated":
                            return
                    except NotFound:
                        pass
            except NotFound:
                pass
            except CloudProviderError as err:
                log.warning("NodeClaim %s: instance %s: %s", claim.name, provider_id, err)
                return
        if node is not None:
            with contextlib.suppress(NotFoundError):
                self.cluster.delete_node(node.name)
        if not self._ledger_settled(claim, now):
            return
        self._retry_once("NodeClaim", claim.name, self._remove_finalizer)
        self.metrics.nodeclaims_terminated.labels(nodepool=claim.nodepool or "").inc()
        self._blocked_said.pop(claim.name, None)
        log.info("NodeClaim %s terminated", claim.name)

    def _retry_once(self, kind: str, name: str, write: Callable[[str], None]) -> None:
        """Run a guarded write; on a conflict read the object afresh from the server and run it once more.
        `write` reads the object from the state each time, so the second try carries the new version."""
        try:
            write(name)
        except ConflictError:
            self.cluster.refresh(kind, name)
            write(name)

    def _remove_finalizer(self, name: str) -> None:
        # The list may hold other controllers' finalizers: the patch is guarded by the version it was
        # computed from (the state's copy, which our own status writes keep current).
        claim = self.state.claims.get(name)
        if claim is None:
            raise NotFoundError(f"NodeClaim {name} not found")
        finalizers = [f for f in claim.metadata.finalizers if f != wk.TERMINATION_FINALIZER]
        self.cluster.patch_nodeclaim(
            name, guarded(claim.metadata.resource_version, {"metadata": {"finalizers": finalizers}})
        )

    def _taint(self, name: str) -> None:
        node = self.state.nodes.get(name)
        if node is None:
            raise NotFoundError(f"Node {name} not found")
        if any(t.key == wk.DISRUPTED_TAINT for t in node.taints):
            return
        taints = [*(t.to_dict() for t in node.taints), {"key": wk.DISRUPTED_TAINT, "effect": "NoSchedule"}]
        self.cluster.patch_node(name, guarded(node_rv(node), {"spec": {"taints": taints}}))

    def _ledger_settled(self, claim: NodeClaim, now: datetime) -> bool:
        """Hand in the ledger rows the claim carries; True once they are stored (or held long enough)."""
        text = claim.metadata.annotations.get(wk.LEDGER_ACTIONS)
        if self.recorder is None or not text:
            return True
        try:
            rows = actions_from_json(text)
        except ValueError as err:
            log.warning("NodeClaim %s: annotation %s ignored: %s", claim.name, wk.LEDGER_ACTIONS, err)
            return True
        self.recorder.actions(rows)
        if self.recorder.stored([(r.command_id, r.node) for r in rows]):
            return True
        deleted = claim.metadata.deletion_timestamp or now
        if deleted.tzinfo is None:
            deleted = deleted.replace(tzinfo=UTC)
        if now - deleted < self.settings.ledger_hold:
            return False
        if claim.name not in self._ledger_said:
            self._ledger_said.add(claim.name)
            log.warning(
                "NodeClaim %s: its ledger rows are not stored after %s; removing its finalizer anyway "
                "(the rows stay queued)",
                claim.name,
                self.settings.ledger_hold,
            )
        return True

    def _drained(self, claim: NodeClaim, node: Node, pods: list[Pod], now: datetime) -> bool:
        """Taint, evict; True once no pod but DaemonSet pods remain."""
        if not any(t.key == wk.DISRUPTED_TAINT for t in node.taints):
            self._retry_once("Node", node.name, self._taint)
        started = condition_time(claim, DRAINING)
        if started is None:
            conditions = set_condition(claim.status.conditions, DRAINING, True, reason="Draining", now=now)
            self.cluster.patch_nodeclaim_status(claim.name, {"conditions": conditions})
            started = now
        grace = (
            durations.parse_duration(claim.spec.termination_grace_period)
            if claim.spec.termination_grace_period
            else None
        )
        expired_at = _expiry(claim)
        if expired_at is not None:
            # An expired node must be gone by expireAfter + terminationGracePeriod, however late its
            # deletion began (Karpenter deletes it at the moment of expiry and counts from there).
            started = min(started, expired_at)
        forced = grace is not None and now - started >= grace
        voluntary = claim.metadata.annotations.get(wk.DISRUPTION_REASON) not in INVOLUNTARY
        remaining = [p for p in pods if not p.is_daemonset_pod and not p.is_terminal]
        if not remaining:
            return True
        if self._retry_at.get(claim.name) and now < self._retry_at[claim.name] and not forced:
            return False
        blocked: list[str] = []
        for pod in remaining:
            if pod.deleting:
                continue
            try:
                if forced:
                    self.cluster.delete_pod(pod.namespace, pod.name)
                    self.metrics.evictions.labels(result="forced").inc()
                    continue
                if voluntary and do_not_disrupt(pod, now):
                    blocked.append(f"{pod.key} has {wk.DO_NOT_DISRUPT}")
                    continue
                self.cluster.evict_pod(pod.namespace, pod.name)
                self.metrics.evictions.labels(result="evicted").inc()
            except EvictionBlocked as err:
                self.metrics.evictions.labels(result="blocked").inc()
                blocked.append(str(err))
            except NotFoundError:
                continue
        if blocked:
            self._retry_at[claim.name] = now + self.settings.eviction_retry
            message = "drain waiting: " + "; ".join(blocked)
            if self._blocked_said.get(claim.name) != message:
                self._blocked_said[claim.name] = message
                self.cluster.record_event(
                    kind="NodeClaim", name=claim.name, reason="DrainBlocked", message=message
                )
        return False
