"""The NodeClaim: the request for one node, written before any cloud call (`karpenter.sh/v1` shape)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from provisioner.api import labels, quantities
from provisioner.api.common import (
    Condition,
    Duration,
    FiniteDuration,
    Model,
    NodeClassReference,
    ObjectMeta,
    Operator,
    Requirement,
    Taint,
)

# Condition types, in lifecycle order.
LAUNCHED = "Launched"
REGISTERED = "Registered"
INITIALIZED = "Initialized"
READY = "Ready"
DRIFTED = "Drifted"
EXPIRED = "Expired"
EMPTY = "Empty"
CONSOLIDATABLE = "Consolidatable"
DISRUPTING = "Disrupting"
DRAINING = "Draining"
"""Set when the termination controller starts a drain; its time bounds `terminationGracePeriod`."""


class ResourceRequirements(Model):
    """Resources the claim's pods need from the node."""

    requests: dict[str, str] = Field(default_factory=dict)
    """Sum of the requests of the pods the claim was made for (quantities)."""


class NodeClaimSpec(Model):
    """What the node must be."""

    node_class_ref: NodeClassReference
    """The NodeClass that launches it."""
    requirements: list[Requirement] = Field(default_factory=list, max_length=100)
    """Narrowed requirements; the `node.kubernetes.io/instance-type` In values are the launch options,
    cheapest first."""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    """What the pods scheduled to it need."""
    taints: list[Taint] = Field(default_factory=list)
    """Taints for the node."""
    startup_taints: list[Taint] = Field(default_factory=list)
    """Start-up taints for the node."""
    expire_after: Duration = "720h"
    """Age after which the node is replaced, or `Never`."""
    termination_grace_period: FiniteDuration | None = None
    """Longest a drain may take."""

    def is_startup_taint(self, key: str, effect: str) -> bool:
        """Whether a Node's taint is one of the claim's start-up taints: matched by key and effect, as
        Karpenter matches them (the value is the owner's business). The one owner of that rule: the
        solver (a starting node's start-up taints need no toleration) and initialization (a claim is not
        initialized while one is left) both ask here."""
        return any(t.key == key and t.effect.value == effect for t in self.startup_taints)


class NodeClaimStatus(Model):
    """What happened to the claim."""

    provider_id: str | None = Field(default=None, alias="providerID")
    """The cloud's id of the instance (`aws:///us-east-1a/i-...`, `gce://project/zone/name`)."""
    node_name: str | None = None
    """Name of the Node that registered for it."""
    image_id: str | None = Field(default=None, alias="imageID")
    """The image the instance booted."""
    instance_type: str | None = None
    """The instance type launched."""
    zone: str | None = None
    """The zone it runs in."""
    capacity_type: str | None = None
    """`spot`, `on-demand` or `reserved`."""
    price_per_hour: float | None = None
    """List price of the offering in $/h."""
    capacity: dict[str, str] = Field(default_factory=dict)
    """The instance's capacity."""
    allocatable: dict[str, str] = Field(default_factory=dict)
    """What pods may use after system reservations."""
    conditions: list[Condition] = Field(default_factory=list)
    """Launched, Registered, Initialized, Ready, then Drifted, Expired, Empty, Consolidatable, Disrupting."""
    last_pod_event_time: str | None = None
    """Last time a pod was bound to or removed from the node."""

    def allocatable_amounts(self) -> quantities.ResourceList:
        """`allocatable` parsed to base units (empty when the instance is not launched yet). The one
        parse of a claim's allocatable: snapshots, the solver and NodePool status read it here."""
        return quantities.parse_resource_list(self.allocatable)

    def capacity_amounts(self) -> quantities.ResourceList:
        """`capacity` parsed to base units (empty when the instance is not launched yet)."""
        return quantities.parse_resource_list(self.capacity)


class NodeClaim(Model):
    """A NodeClaim (`provisioner.sh/v1`): the request for one node, written before any cloud call. Its status
    carries the instance launched (provider id, type, zone, capacity type, price) and the lifecycle
    conditions. Field-compatible with Karpenter's `karpenter.sh/v1` NodeClaim."""

    api_version: Literal["provisioner.sh/v1"] = Field("provisioner.sh/v1", alias="apiVersion")
    kind: Literal["NodeClaim"] = "NodeClaim"
    metadata: ObjectMeta
    spec: NodeClaimSpec
    status: NodeClaimStatus = Field(default_factory=NodeClaimStatus)

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def nodepool(self) -> str | None:
        return self.metadata.labels.get(labels.NODEPOOL)

    def allowed_values(self, key: str) -> tuple[set[str] | None, set[str]]:
        """What the requirements say of one label: (the In values, or None when any value goes; the NotIn
        values). DoesNotExist allows no value at all."""
        allowed: set[str] | None = None
        excluded: set[str] = set()
        for req in self.spec.requirements:
            if req.key != key:
                continue
            if req.operator == Operator.IN:
                allowed = set(req.values) if allowed is None else allowed & set(req.values)
            elif req.operator == Operator.NOT_IN:
                excluded |= set(req.values)
            elif req.operator == Operator.DOES_NOT_EXIST:
                allowed = set()
        return allowed, excluded

    def admits(self, key: str, value: str) -> bool:
        """Whether a node with `key=value` satisfies the claim's In, NotIn and DoesNotExist requirements."""
        allowed, excluded = self.allowed_values(key)
        return (allowed is None or value in allowed) and value not in excluded

    def instance_type_options(self) -> list[str]:
        """The launch options, in the order the scheduler ranked them (cheapest first)."""
        for req in self.spec.requirements:
            if req.key == labels.INSTANCE_TYPE and req.operator == Operator.IN:
                return list(req.values)
        return []
