"""Pieces every controller shares: which provider serves a NodeClass kind, condition bookkeeping on
status dicts, and the annotation keys the controllers write for each other."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from provisioner.api import NodeClaim, NodePool, quantities
from provisioner.api import labels as wk
from provisioner.api.common import Condition, ConditionStatus
from provisioner.api.nodeclass import NodeClass
from provisioner.clock import isoformat
from provisioner.cloudprovider import CloudProvider, CloudProviderError, InstanceType
from provisioner.controllers.cluster import ClusterAPI
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.settings import Settings
from provisioner.scheduling.results import NewClaim
from provisioner.state import ClusterState, Snapshot

log = logging.getLogger(__name__)

PLANNED_OFFERING = f"{wk.GROUP}/planned-offering"
"""Claim annotation: the offering the scheduler priced (`type/zone/capacity-type`), so the lifecycle
controller can say so when the launch had to fall back to another."""
DISRUPTION_REASON = f"{wk.GROUP}/disruption-reason"
"""Claim annotation written just before a deletion we decide: why (`Interrupted`, `Unregistered`...)."""
INVOLUNTARY = frozenset({"Interrupted", "Unregistered", "NotInitialized", "InstanceGone", "LaunchFailed"})
"""Reasons that do not respect do-not-disrupt (the node is going or never worked)."""
DRAINING = "Draining"
"""Claim condition set when its drain starts; its time bounds `terminationGracePeriod`."""


class ProviderSet:
    """NodeClass kind -> the CloudProvider that launches it (`--cloud aws,gcp` serves both kinds)."""

    def __init__(self, by_kind: Mapping[str, CloudProvider]) -> None:
        self.by_kind = dict(by_kind)

    @classmethod
    def single(cls, provider: CloudProvider) -> ProviderSet:
        """One provider for every NodeClass kind (the fake cloud)."""
        return cls({"AWSNodeClass": provider, "GCPNodeClass": provider})

    def for_kind(self, kind: str) -> CloudProvider | None:
        return self.by_kind.get(kind)

    def for_claim(self, claim: NodeClaim) -> CloudProvider | None:
        return self.by_kind.get(claim.spec.node_class_ref.kind)

    def unique(self) -> list[CloudProvider]:
        seen: list[CloudProvider] = []
        for p in self.by_kind.values():
            if all(p is not q for q in seen):
                seen.append(p)
        return seen

    def kinds_of(self, provider: CloudProvider) -> set[str]:
        return {k for k, p in self.by_kind.items() if p is provider}


_snapshots: weakref.WeakKeyDictionary[ClusterState, tuple[int, Snapshot]] = weakref.WeakKeyDictionary()


def snapshot_of(state: ClusterState) -> Snapshot:
    """The state's snapshot, shared by every controller of a step until the state changes (a snapshot
    of a large cluster costs milliseconds; a step takes several)."""
    generation = state.generation
    hit = _snapshots.get(state)
    if hit is not None and hit[0] == generation:
        return hit[1]
    snap = state.snapshot()
    _snapshots[state] = (generation, snap)
    return snap


def guarded(obj_meta_rv: str | None, patch: dict[str, Any]) -> dict[str, Any]:
    """The patch with the resourceVersion it was computed from, so a list field (taints, finalizers)
    written from a stale read fails with a conflict (and is retried) instead of dropping another
    writer's entry."""
    if not obj_meta_rv:
        return patch
    meta = dict(patch.get("metadata") or {})
    meta["resourceVersion"] = obj_meta_rv
    return {**patch, "metadata": meta}


def node_rv(node: Any) -> str | None:
    return (node.raw.get("metadata") or {}).get("resourceVersion") if node is not None else None


def node_class_of(state: ClusterState | Snapshot, kind: str, name: str) -> NodeClass | None:
    return state.nodeclasses.get((kind, name))


def set_condition(
    conditions: Iterable[Condition],
    type_: str,
    status: bool | None,
    *,
    reason: str,
    message: str = "",
    now: datetime,
) -> list[dict[str, Any]]:
    """The claim's conditions with `type_` set; the transition time moves only when the status changes."""
    text = (
        ConditionStatus.UNKNOWN
        if status is None
        else ConditionStatus.TRUE
        if status
        else ConditionStatus.FALSE
    )
    out: list[dict[str, Any]] = []
    found = False
    for c in conditions:
        d = c.model_dump(by_alias=True, exclude_none=True, mode="json")
        if c.type == type_:
            found = True
            if c.status != text:
                d["lastTransitionTime"] = isoformat(now)
            d.update(status=text.value, reason=reason, message=message)
        out.append(d)
    if not found:
        out.append(
            {
                "type": type_,
                "status": text.value,
                "reason": reason,
                "message": message,
                "lastTransitionTime": isoformat(now),
            }
        )
    return out


def condition_time(claim: NodeClaim, type_: str) -> datetime | None:
    for c in claim.status.conditions:
        if c.type == type_:
            return c.last_transition_time
    return None


def condition_status(claim: NodeClaim, type_: str) -> str | None:
    for c in claim.status.conditions:
        if c.type == type_:
            return c.status.value
    return None


def resources_of(instance_type: InstanceType) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) of a type as quantity strings, for a claim's status."""

    def fmt(rl: Mapping[str, int]) -> dict[str, str]:
        return {k: quantities.format_quantity(k, v) for k, v in sorted(rl.items()) if v > 0}

    return fmt(instance_type.capacity), fmt(instance_type.allocatable)


def extended_resources(requests: Mapping[str, str]) -> list[str]:
    """Requested resources a device plugin must advertise (GPUs, ...), not kubelet's own."""
    builtin = {quantities.CPU, quantities.MEMORY, quantities.PODS, quantities.EPHEMERAL_STORAGE}
    return sorted(k for k in requests if k not in builtin and "/" in k)


def build_nodeclaim(new: NewClaim, state: ClusterState | Snapshot, *, suffix: str) -> NodeClaim:
    """The NodeClaim for a scheduler decision, as provisioning and disruption both write it: named
    `POOL-SUFFIX`, with the drift hashes and the offering the scheduler planned (the launch may still
    fall back)."""
    ref = new.nodepool.spec.template.spec.node_class_ref
    claim = new.to_nodeclaim(
        f"{new.nodepool.name}-{suffix}", node_class=node_class_of(state, ref.kind, ref.name)
    )
    claim.metadata.annotations[PLANNED_OFFERING] = (
        f"{new.instance_type.name}/{new.offering.zone}/{new.offering.capacity_type}"
    )
    return claim


@dataclass(kw_only=True, eq=False)
class Reconciler:
    """What every controller holds: the state it reads, the API it writes through, the clouds, its
    settings and metrics. Subclasses add their own memory as fields with `init=False`."""

    state: ClusterState
    cluster: ClusterAPI
    providers: ProviderSet
    settings: Settings
    metrics: Metrics


def pool_instance_types(
    providers: ProviderSet, snap: Snapshot, pools: Iterable[NodePool]
) -> dict[str, list[InstanceType]]:
    """Pool name -> the types its NodeClass can launch now. A pool whose cloud or NodeClass is missing, or
    whose cloud cannot answer, gets none (its pods get a reason; the other pools go on)."""
    out: dict[str, list[InstanceType]] = {}
    for pool in pools:
        ref = pool.spec.template.spec.node_class_ref
        provider = providers.for_kind(ref.kind)
        node_class = snap.nodeclasses.get((ref.kind, ref.name))
        out[pool.name] = []
        if provider is None or node_class is None:
            continue
        try:
            out[pool.name] = list(provider.instance_types(node_class))
        except CloudProviderError as err:
            log.warning("pool %s: cannot list instance types: %s", pool.name, err)
    return out
