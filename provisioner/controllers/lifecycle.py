"""Lifecycle of a NodeClaim: Launched -> Registered -> Initialized, with a timeout on each step.

- Launched: a gang's claims together through `provider.create_group` (`gang_launch`); any other with
  `provider.create` and the claim's options (the claim name is the idempotency token, so a
  controller restarted between the launch and the status write gets the same instance back). An
  InsufficientCapacity marks those offerings unavailable (the CachingProvider wrapper also remembers
  them, so the next solve avoids them) and the next option is tried; when none is left the claim is
  deleted and its pods are solved again, so they fall to the next tier or pool. When the launch fell back from the offering the scheduler priced, an Event
  says so.
- Registered: the Node with the claim's provider id appeared; it gets the pool's labels and taints, and
  loses the unregistered taint. The labels only the cloud knows once the instance runs (AWS
  `topology.k8s.aws/network-node-layer-*`, GCP `gce-topology-*`) are asked for then and copied to the
  Node and the claim, so Kueue topology-aware scheduling can pack by them. None after
  `registration_timeout`: the claim is replaced (a gang's whole launch group, `gang_launch`).
- Initialized: the Node is Ready, the start-up taints are gone (removed by their owners), and every
  extended resource the claim asked for (`nvidia.com/gpu`, or the `nvidia.com/mig-<profile>` slices the
  MIG manager makes once it applied the pool's layout: pending until then) is allocatable. A claim asking
  for extended resources that are not there after `initialization_timeout` is replaced, with an Event.
- Ready (the root condition `kubectl get nodeclaims` shows): True once all three are, False when one
  failed, Unknown while one is pending; Karpenter's semantics.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from provisioner.api import NodeClaim, accelerators, quantities
from provisioner.api import labels as wk
from provisioner.api.common import Condition
from provisioner.api.nodeclaim import INITIALIZED, LAUNCHED, REGISTERED
from provisioner.cloudprovider import (
    CloudProviderError,
    CreateError,
    Instance,
    InstanceType,
    InsufficientCapacity,
    NodeClassNotReady,
    OfferingKey,
    TransientError,
)
from provisioner.cloudprovider.types import for_template
from provisioner.clusterapi import ClusterError, ConflictError, NotFoundError, guarded, node_rv
from provisioner.controllers import gang_launch
from provisioner.controllers.conditions import condition_status, condition_time, set_condition, with_ready
from provisioner.controllers.provider_set import node_class_of
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.watch import Watch
from provisioner.finops.recorder import LedgerRecorder
from provisioner.state import Snapshot
from provisioner.state.objects import Node

log = logging.getLogger(__name__)


def _step_condition(
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


def _flag_unavailable(types: list[InstanceType], gone: set[OfferingKey]) -> list[InstanceType]:
    return [
        t.with_offerings(
            tuple(replace(o, available=False) if o.offering_key(t.name) in gone else o for o in t.offerings)
        )
        for t in types
    ]


def _resources_of(instance_type: InstanceType) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) of a type as quantity strings, for a claim's status."""

    def fmt(rl: Mapping[str, int]) -> dict[str, str]:
        return {k: quantities.format_quantity(k, v) for k, v in sorted(rl.items()) if v > 0}

    return fmt(instance_type.capacity), fmt(instance_type.allocatable)


def _extended_resources(requests: Mapping[str, str]) -> list[str]:
    """Requested resources a device plugin must advertise (GPUs, MIG slices, Neuron...), not kubelet's own:
    Kubernetes' extended resources (`accelerators.is_extended`)."""
    return sorted(k for k in requests if accelerators.is_extended(k))


def _settled(claim: NodeClaim) -> bool:
    """Launched, registered and initialized: nothing left for lifecycle to do."""
    return (
        bool(claim.status.provider_id)
        and condition_status(claim, REGISTERED) == "True"
        and condition_status(claim, INITIALIZED) == "True"
    )


def _summary(keys: set[OfferingKey], limit: int = 6) -> str:
    names = sorted(str(k) for k in keys)
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


@dataclass(kw_only=True, eq=False)
class LifecycleController(Reconciler):
    recorder: LedgerRecorder | None = None
    """Where a gang launch that ended partial books what it cost (`gang_launch`)."""
    # Claim -> (failed launches, not before): a failing launch backs off instead of calling the cloud
    # every step (in memory only: a restart tries at once, which is what a restart is for).
    _retry: dict[str, tuple[int, datetime]] = field(default_factory=dict, init=False)
    _settled: dict[str, NodeClaim] = field(default_factory=dict, init=False)
    """Claim name -> the claim object last seen launched, registered and initialized: a snapshot hands
    back the same object while the claim is unchanged, and such a claim needs nothing from a pass."""

    _watch: Watch = field(init=False)
    _busy: bool = field(default=True, init=False)
    """The last pass left a claim with a step to take (a launch to retry among them): the next pass walks
    the claims again, written or not, since the steps' timeouts and backoffs run on time alone."""

    def __post_init__(self) -> None:
        self._watch = Watch(self.state, ("NodeClaim",))

    def reconcile(self, now: datetime) -> None:
        # Every claim settled and none written since: no step to take. (A Node matters only to a claim
        # still registering or initializing, and such a claim keeps the controller busy.)
        if not self._watch.take() and not self._busy:
            return
        snap = self.state.snapshot()
        settled: dict[str, NodeClaim] = {}
        todo: list[NodeClaim] = []
        for state_node in snap.nodes:
            claim = state_node.claim
            if claim is None or claim.metadata.deletion_timestamp is not None:
                continue
            if self._settled.get(claim.name) is claim or _settled(claim):
                settled[claim.name] = claim
            else:
                todo.append(claim)
        self._settled = settled
        self._busy = bool(todo)
        if not todo:
            return
        nodes_by_pid = {
            sn.node.provider_id: sn.node for sn in snap.nodes if sn.node is not None and sn.node.provider_id
        }
        # A gang's claims launch together, all or none; the rest of their life is any claim's.
        todo, groups = gang_launch.split(todo)
        try:  # a gang member that never registers takes its whole launch group with it
            gone = gang_launch.unregistered(self, todo, snap, now)
            todo = [c for c in todo if c.name not in gone]
        except ClusterError as err:
            log.warning("gang registration: %s", err)
        if groups:
            try:
                gang_launch.launch_gangs(self, groups, snap, now)
            except ClusterError as err:
                log.warning("gang launch: %s", err)
        for claim in todo:
            try:
                if not claim.status.provider_id:
                    self._launch(claim, snap, now)
                elif condition_status(claim, REGISTERED) != "True":
                    self._register(claim, nodes_by_pid.get(claim.status.provider_id), now)
                elif condition_status(claim, INITIALIZED) != "True":
                    self._initialize(claim, nodes_by_pid.get(claim.status.provider_id), now)
            except NotFoundError:
                continue  # deleted meanwhile; the next reconcile sees it gone
            except ConflictError as err:
                log.info("NodeClaim %s: %s; the next reconcile works from the newer copy", claim.name, err)
            except ClusterError as err:
                log.warning("NodeClaim %s: %s", claim.name, err)

    # Launch

    def _replace(self, claim: NodeClaim, *, reason: str, message: str) -> None:
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

    def _launch(self, claim: NodeClaim, snap: Snapshot, now: datetime) -> None:
        first_seen = condition_time(claim, LAUNCHED)
        if first_seen is None:
            # Start the launch clock durably, so a restarted controller keeps counting from here.
            conditions = _step_condition(
                claim.status.conditions, LAUNCHED, None, reason="Launching", message="", now=now
            )
            self.cluster.patch_nodeclaim_status(claim.name, {"conditions": conditions})
            first_seen = now
        if now - first_seen >= self.settings.launch_timeout:
            self._replace(
                claim,
                reason="LaunchFailed",
                message=f"not launched within {self.settings.launch_timeout}; its pods will be provisioned again",
            )
            return
        not_before = self._retry.get(claim.name, (0, now))[1]
        if now < not_before:
            return
        ref = claim.spec.node_class_ref
        provider = self.providers.for_claim(claim)
        node_class = node_class_of(snap, ref.kind, ref.name)
        if provider is None or node_class is None:
            what = f"no cloud serves {ref.kind}" if provider is None else f"{ref.kind} {ref.name} not found"
            self._launch_failed(claim, "NodeClassNotFound", what, now)
            return
        try:
            # The claim carries its pool's template labels: a MIG layout there makes its types offer slices.
            by_name = {
                t.name: t for t in for_template(claim.metadata.labels, provider.instance_types(node_class))
            }
        except CloudProviderError as err:
            self._launch_failed(claim, type(err).__name__, str(err), now)
            return
        options = [by_name[n] for n in claim.instance_type_options() if n in by_name]
        if not options:
            options = list(by_name.values()) if not claim.instance_type_options() else []
        exhausted: set[OfferingKey] = set()
        instance: Instance | None = None
        for _ in range(self.settings.max_launch_attempts):
            try:
                instance = provider.create(claim, _flag_unavailable(options, exhausted), node_class)
                break
            except InsufficientCapacity as err:
                new = set(err.offerings) - exhausted
                self.metrics.launch_failures.labels(reason="InsufficientCapacity").inc(max(1, len(new)))
                if not new:
                    break
                exhausted |= new
                log.info("NodeClaim %s: no capacity for %s; trying the next option", claim.name, err)
            except (CreateError, NodeClassNotReady) as err:
                self.metrics.launch_failures.labels(reason=type(err).__name__).inc()
                self._launch_failed(claim, type(err).__name__, str(err), now)
                return
            except TransientError as err:
                self.metrics.launch_failures.labels(reason="TransientError").inc()
                log.warning("NodeClaim %s: launch will be retried: %s", claim.name, err)
                self._back_off(claim.name, now)
                return
        if instance is None:
            tried = _summary(exhausted) or "every option"
            self._replace(
                claim,
                reason="InsufficientCapacity",
                message=(
                    f"no capacity for any of its options (tried {tried}); "
                    "its pods will be provisioned again on the next tier or pool"
                ),
            )
            return
        self._retry.pop(claim.name, None)
        self._launched(claim, instance, by_name.get(instance.instance_type), exhausted, now)

    def _back_off(self, name: str, now: datetime) -> None:
        failures = self._retry.get(name, (0, now))[0] + 1
        delay = min(self.settings.launch_backoff_max, self.settings.launch_backoff * 2 ** (failures - 1))
        self._retry[name] = (failures, now + delay)

    def _launch_failed(self, claim: NodeClaim, reason: str, message: str, now: datetime) -> None:
        self._back_off(claim.name, now)
        if condition_status(claim, LAUNCHED) == "False" and any(
            c.type == LAUNCHED and c.reason == reason for c in claim.status.conditions
        ):
            return
        conditions = _step_condition(
            claim.status.conditions, LAUNCHED, False, reason=reason, message=message, now=now
        )
        self.cluster.patch_nodeclaim_status(claim.name, {"conditions": conditions})
        self.cluster.record_event(
            kind="NodeClaim", name=claim.name, reason=reason, message=message, type="Warning"
        )

    def _launched(
        self,
        claim: NodeClaim,
        instance: Instance,
        instance_type: InstanceType | None,
        exhausted: set[OfferingKey],
        now: datetime,
    ) -> None:
        capacity, allocatable = _resources_of(instance_type) if instance_type else ({}, {})
        labels = dict(instance_type.labels) if instance_type else {}
        labels.update(
            {
                wk.INSTANCE_TYPE: instance.instance_type,
                wk.ZONE: instance.zone,
                wk.CAPACITY_TYPE: instance.capacity_type,
            }
        )
        labels.update(instance.labels)  # what only the cloud knows (network topology), when it told us
        if instance.reservation_id:
            labels[wk.CAPACITY_RESERVATION_ID] = instance.reservation_id
            labels[wk.CAPACITY_RESERVATION_TYPE] = instance.reservation_type or wk.RESERVATION_TYPE_DEFAULT
        self.cluster.patch_nodeclaim(claim.name, {"metadata": {"labels": labels}})
        status: dict[str, Any] = {
            "providerID": instance.provider_id,
            "instanceType": instance.instance_type,
            "zone": instance.zone,
            "capacityType": instance.capacity_type,
            "pricePerHour": instance.price,
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": _step_condition(
                claim.status.conditions,
                LAUNCHED,
                True,
                reason="Launched",
                message=f"{instance.instance_type} {instance.capacity_type} in {instance.zone}",
                now=now,
            ),
        }
        if instance.image_id:
            status["imageID"] = instance.image_id
        self.cluster.patch_nodeclaim_status(claim.name, status)
        log.info(
            "launched NodeClaim %s as %s (%s %s in %s, $%.4f/h)",
            claim.name,
            instance.provider_id,
            instance.instance_type,
            instance.capacity_type,
            instance.zone,
            instance.price,
        )
        planned = claim.metadata.annotations.get(wk.PLANNED_OFFERING)
        got = f"{instance.instance_type}/{instance.zone}/{instance.capacity_type}"
        if planned and planned != got:
            p_type, _, rest = planned.partition("/")
            p_zone, _, p_ct = rest.partition("/")
            message = (
                f"{p_ct} capacity for {p_type} in {p_zone} was not available; launched "
                f"{instance.capacity_type} {instance.instance_type} in {instance.zone} instead"
            )
            if exhausted:
                message += f" (no capacity: {_summary(exhausted)})"
            self.cluster.record_event(kind="NodeClaim", name=claim.name, reason="FellBack", message=message)

    # Registration

    def _register(self, claim: NodeClaim, node: Node | None, now: datetime) -> None:
        launched_at = condition_time(claim, LAUNCHED) or now
        if node is None:
            if now - launched_at >= self.settings.registration_timeout:
                self._replace(
                    claim,
                    reason="Unregistered",
                    message=(
                        f"no Node registered for {claim.status.provider_id} within "
                        f"{self.settings.registration_timeout}; replacing it"
                    ),
                )
            return
        labels = dict(claim.metadata.labels)
        cloud = self._cloud_labels(claim)
        if cloud:
            labels.update(cloud)
            self.cluster.patch_nodeclaim(claim.name, {"metadata": {"labels": cloud}})
        labels.update({wk.NODECLAIM: claim.name, wk.REGISTERED: "true"})
        taints = [t.to_dict() for t in node.taints if t.key != wk.UNREGISTERED_TAINT]
        have = {(t["key"], t["effect"]) for t in taints}
        for t in [*claim.spec.taints, *claim.spec.startup_taints]:
            d = t.model_dump(by_alias=True, exclude_none=True, mode="json")
            if (d["key"], d["effect"]) not in have:
                taints.append(d)
                have.add((d["key"], d["effect"]))
        annotations = dict(claim.metadata.annotations)
        annotations.pop(wk.PLANNED_OFFERING, None)
        self.cluster.patch_node(
            node.name,
            guarded(
                node_rv(node),
                {"metadata": {"labels": labels, "annotations": annotations}, "spec": {"taints": taints}},
            ),
        )
        conditions = _step_condition(
            claim.status.conditions, REGISTERED, True, reason="Registered", message=node.name, now=now
        )
        self.cluster.patch_nodeclaim_status(claim.name, {"nodeName": node.name, "conditions": conditions})
        log.info("NodeClaim %s registered as Node %s", claim.name, node.name)

    def _cloud_labels(self, claim: NodeClaim) -> dict[str, str]:
        """The labels the cloud reports for the running instance (network topology) that the claim does
        not carry yet; {} when it reports none or cannot answer now (the Node registers without them)."""
        provider = self.providers.for_claim(claim)
        if provider is None or not claim.status.provider_id:
            return {}
        try:
            instance = provider.get(claim.status.provider_id)
        except CloudProviderError as err:
            log.info("NodeClaim %s: no cloud labels at registration: %s", claim.name, err)
            return {}
        have = claim.metadata.labels
        return {k: v for k, v in instance.labels.items() if have.get(k) != v}

    # Initialization

    def _initialize(self, claim: NodeClaim, node: Node | None, now: datetime) -> None:
        if node is None:
            return  # the node went away; garbage collection handles claims whose instance is gone
        missing: list[str] = []
        if not node.ready:
            missing.append("node not Ready")
        startup = {(t.key, t.effect.value) for t in claim.spec.startup_taints}
        left = [t.key for t in node.taints if (t.key, t.effect) in startup or t.key == wk.UNREGISTERED_TAINT]
        if left:
            missing.append("start-up taints still present: " + ", ".join(left))
        requested = quantities.parse_resource_list(claim.spec.resources.requests)
        for name in _extended_resources(claim.spec.resources.requests):
            if node.allocatable.get(name, 0) < max(1, requested.get(name, 0)):
                missing.append(
                    f"{name} not allocatable ({node.allocatable.get(name, 0)} of {requested.get(name, 0)})"
                )
        if not missing:
            self.cluster.patch_node(node.name, {"metadata": {"labels": {wk.INITIALIZED: "true"}}})
            conditions = _step_condition(
                claim.status.conditions, INITIALIZED, True, reason="Initialized", now=now
            )
            self.cluster.patch_nodeclaim_status(claim.name, {"conditions": conditions})
            log.info("NodeClaim %s initialized (Node %s)", claim.name, node.name)
            return
        registered_at = condition_time(claim, REGISTERED) or now
        needs_devices = bool(_extended_resources(claim.spec.resources.requests))
        if needs_devices and now - registered_at >= self.settings.initialization_timeout:
            self._replace(
                claim,
                reason="NotInitialized",
                message=(
                    f"Node {node.name} not initialized {self.settings.initialization_timeout} after registering ("
                    + "; ".join(missing)
                    + "); replacing it"
                ),
            )
            return
        message = "; ".join(missing)
        current = next((c for c in claim.status.conditions if c.type == INITIALIZED), None)
        if current is None or current.message != message:
            conditions = _step_condition(
                claim.status.conditions, INITIALIZED, False, reason="NotInitialized", message=message, now=now
            )
            self.cluster.patch_nodeclaim_status(claim.name, {"conditions": conditions})
