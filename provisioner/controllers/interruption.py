"""Interruption: the cloud is taking an instance back (spot warning, preemption). The claim is disrupted
ahead of time: the node is cordoned, the claim deleted (termination drains it, ignoring do-not-disrupt,
since the node goes anyway), and provisioning is told to solve the node's pods at once rather than after
the batch window, so their replacement is launching while the drain runs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from provisioner.api import labels as wk
from provisioner.cloudprovider import CloudProviderError, InterruptionEvent
from provisioner.clusterapi import ClusterError, NotFoundError
from provisioner.controllers.reconciler import Reconciler
from provisioner.state.cluster import StateNode

log = logging.getLogger(__name__)


@dataclass(kw_only=True, eq=False)
class InterruptionController(Reconciler):
    on_interrupted: Callable[[], None] = lambda: None
    """Called once an interrupted claim is deleted (the Manager: provisioning solves at once)."""
    _retry: list[InterruptionEvent] = field(default_factory=list, init=False)

    def reconcile(self, now: datetime) -> None:
        # Providers hand each event out once: one that could not be acted on is kept and tried again.
        pending, self._retry = self._retry, []
        for provider in self.providers.unique():
            try:
                pending.extend(provider.interruptions())
            except CloudProviderError as err:
                log.warning("cannot read %s interruptions: %s", provider.name, err)
        # One snapshot for the pass (a fleet-wide interruption is one event per node), indexed by provider
        # id; taken again only when an instance comes up twice, so the second sees what the first did.
        by_provider: dict[str, StateNode] | None = None
        handled: set[str] = set()
        for event in pending:
            if by_provider is None or event.provider_id in handled:
                by_provider = {}
                for n in self.state.snapshot().nodes:
                    if n.claim is not None and n.claim.status.provider_id:
                        by_provider.setdefault(n.claim.status.provider_id, n)
            handled.add(event.provider_id)
            if not self._handle(
                by_provider.get(event.provider_id), event.provider_id, event.kind, event.detail
            ):
                self._retry.append(event)

    def _handle(self, sn: StateNode | None, provider_id: str, kind: str, detail: str) -> bool:
        """Act on one event (`sn`: the instance's node and claim, if ours); False when it must be tried
        again."""
        if sn is None or sn.claim is None:
            log.info("interruption %s for %s: no NodeClaim of ours", kind, provider_id)
            return True
        claim = sn.claim
        if claim.metadata.annotations.get(wk.DISRUPTION_REASON) != "Interrupted":
            self.metrics.interruptions.labels(kind=kind).inc()
        message = f"{kind} for {provider_id}" + (f": {detail}" if detail else "") + "; replacing the node"
        log.warning("NodeClaim %s: %s", claim.name, message)
        try:
            if sn.node is not None and not sn.node.unschedulable:
                self.cluster.patch_node(sn.node.name, {"spec": {"unschedulable": True}})
            self.cluster.record_event(
                kind="NodeClaim", name=claim.name, reason="Interrupted", message=message, type="Warning"
            )
            if claim.metadata.deletion_timestamp is None:
                self.cluster.patch_nodeclaim(
                    claim.name, {"metadata": {"annotations": {wk.DISRUPTION_REASON: "Interrupted"}}}
                )
                self.cluster.delete_nodeclaim(claim.name)
        except NotFoundError:
            return True
        except ClusterError as err:
            log.warning("NodeClaim %s: interruption handling failed, will retry: %s", claim.name, err)
            return False
        self.on_interrupted()
        return True
