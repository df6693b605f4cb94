"""What every lifecycle step shares: the `Pass` a step is handed, the `Step` base (a step acts through the lifecycle controller that
runs it, so they never disagree on the cluster, providers, settings or metrics), replacing a claim, the
step conditions and the root `Ready` derived from them, and small readings of a claim."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from provisioner.api import NodeClaim, accelerators
from provisioner.api import labels as wk
from provisioner.api.common import Condition
from provisioner.api.nodeclaim import INITIALIZED, LAUNCHED, REGISTERED
from provisioner.cloudprovider import OfferingKey
from provisioner.clusterapi import ClusterAPI
from provisioner.controllers.conditions import condition_status, set_condition, with_ready
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.provider_set import ProviderSet
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.settings import ControllerSettings
from provisioner.finops.recorder import LedgerRecorder
from provisioner.state import Snapshot
from provisioner.state.objects import Node

log = logging.getLogger("provisioner.controllers.lifecycle")


@dataclass(frozen=True, slots=True)
class Pass:
    """What one lifecycle pass hands every step."""

    snap: Snapshot
    """The cluster as the pass found it: every step sees its claims, not what an earlier step wrote."""
    now: datetime
    nodes: Mapping[str, Node]
    """The snapshot's Nodes by provider id."""

    def node_of(self, claim: NodeClaim) -> Node | None:
        """The Node registered for the claim's instance, if any."""
        return self.nodes.get(claim.status.provider_id) if claim.status.provider_id else None


@dataclass(kw_only=True, eq=False)
class Step:
    """One step of a NodeClaim's life, run by the lifecycle controller (`owner`) for each claim it has
    not settled, in order: liveness, launch, registration, initialization."""

    owner: Reconciler = field(repr=False)
    """The lifecycle controller: the cluster, providers, settings and metrics are read through it."""
    recorder: LedgerRecorder | None = None
    """Where what a gang launch given up cost is booked (`gang_launch`)."""

    def reconcile(self, claim: NodeClaim, p: Pass) -> bool:
        """Act on the claim if it is in this step's state. True when the claim was replaced (the steps
        after this one leave it alone)."""
        raise NotImplementedError

    @property
    def cluster(self) -> ClusterAPI:
        return self.owner.cluster

    @property
    def providers(self) -> ProviderSet:
        return self.owner.providers

    @property
    def settings(self) -> ControllerSettings:
        return self.owner.settings

    @property
    def metrics(self) -> Metrics:
        return self.owner.metrics

    def replace(self, claim: NodeClaim, *, reason: str, message: str) -> None:
        """Delete the claim (its pods are solved again) and say why, on the claim and its pool."""
        log.warning("replacing NodeClaim %s: %s", claim.name, message)
        self.metrics.nodeclaims_replaced.labels(reason=reason).inc()
        self.cluster.record_event(
            kind="NodeClaim", name=claim.name, reason=reason, message=message, type="Warning"
        )
        if claim.nodepool:
            self.cluster.record_event(
                kind="NodePool",
                name=claim.nodepool,
                reason=reason,
                message=f"{claim.name}: {message}",
                type="Warning",
            )
        self.cluster.patch_nodeclaim(
            claim.name, {"metadata": {"annotations": {wk.DISRUPTION_REASON: reason}}}
        )
        self.cluster.delete_nodeclaim(claim.name)


def step_condition(
    conditions: list[Condition],
    type_: str,
    status: bool | None,
    *,
    reason: str,
    message: str = "",
    now: datetime,
) -> list[dict[str, Any]]:
    """One lifecycle step's condition set, and the root `Ready` derived from the three steps."""
    stepped = set_condition(conditions, type_, status, reason=reason, message=message, now=now)
    return with_ready(stepped, (LAUNCHED, REGISTERED, INITIALIZED), now=now)


def settled(claim: NodeClaim) -> bool:
    """Launched, registered and initialized: nothing left for lifecycle to do."""
    return (
        bool(claim.status.provider_id)
        and condition_status(claim, REGISTERED) == "True"
        and condition_status(claim, INITIALIZED) == "True"
    )


def extended_resources(requests: Mapping[str, str]) -> list[str]:
    """Requested resources a device plugin must advertise (GPUs, MIG slices, Neuron...), not kubelet's own:
    Kubernetes' extended resources (`accelerators.is_extended`)."""
    return sorted(k for k in requests if accelerators.is_extended(k))


def summary(keys: set[OfferingKey], limit: int = 6) -> str:
    """Offerings for a message: the first `limit` by name, and how many more."""
    names = sorted(str(k) for k in keys)
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more
