"""The CloudProvider protocol: the whole surface the controllers use to spend and stop spending money."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.types import InstanceType


@dataclass(frozen=True, slots=True)
class Instance:
    """A launched instance as the provider sees it."""

    provider_id: str
    """`aws:///ZONE/i-...`, `gce://PROJECT/ZONE/NAME` or `fake://ZONE/NAME`."""
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    """$/h of the offering launched."""
    state: str = "running"
    """`pending`, `running`, `stopping`, `terminated`..."""
    nodeclaim: str | None = None
    """The claim named by its tag/label."""
    nodepool: str | None = None
    launched_at: datetime | None = None
    image_id: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    reservation_id: str | None = None
    """The reservation the instance runs in (capacity type `reserved`)."""
    reservation_type: str | None = None
    """`default` or `capacity-block`, with `reservation_id`."""
    placement_group: str | None = None
    """The placement group (AWS) or resource policy (GCP) the instance launched into, if any."""
    labels: dict[str, str] = field(default_factory=dict)
    """Node labels only the cloud knows, as it reports them: the network topology
    (`topology.k8s.aws/network-node-layer-N`, `cloud.google.com/gce-topology-block`...)."""
    skipped: tuple[OfferingKey, ...] = ()
    """Offerings the launch found out of capacity before this one succeeded (e.g. CreateFleet errors
    beside the instance it did launch); the caching wrapper marks them unavailable."""


@dataclass(frozen=True, slots=True)
class InterruptionEvent:
    """The cloud is taking an instance back (spot warning, preemption) or asks to move off it."""

    provider_id: str
    kind: str
    """`spot-interruption`, `rebalance`, `scheduled-change`, `state-change`, `preemption`."""
    time: datetime | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class GangPlacement:
    """Where the instances of one gang go, beyond the one offering every group launch uses.

    The NodeClass says how a gang is kept close (an AWS cluster placement group named there or one
    created per gang, a GCP compact placement policy); this says which gang a launch is for, so the
    provider names, tags, finds again and garbage-collects what it creates for it, and pins a launch
    that completes or replaces part of a gang to where the rest of it runs."""

    gang: str
    """The gang's key (e.g. `NAMESPACE/NAME` of its pod group or ProvisioningRequest). Names and tags
    the placement group or policy a provider creates for the gang, and tags every member instance."""
    zone: str | None = None
    """Launch only in this zone (members added beside a gang that already runs there). None: any zone
    the claims allow, all in one."""
    group: str | None = None
    """Launch into this existing placement group (AWS) or resource policy (GCP), e.g. the one the
    gang's running members are in. None: the NodeClass's placement."""


@runtime_checkable
class CloudProvider(Protocol):
    """One cloud. Every method may raise TransientError; the retry wrapper handles it."""

    name: str

    def instance_types(self, node_class: NodeClass) -> list[InstanceType]:
        """Every type the NodeClass can launch, offerings flagged unavailable where capacity is out.
        Raises NodeClassNotReady."""
        ...

    def create(self, claim: NodeClaim, instance_types: list[InstanceType], node_class: NodeClass) -> Instance:
        """Launch the cheapest available offering among `instance_types` (the claim's options, in order)
        allowed by the claim's requirements. Idempotent: the claim name is the token, a second call returns
        the first instance. Raises InsufficientCapacity (naming every offering tried), CreateError,
        NodeClassNotReady."""
        ...

    def create_group(
        self,
        claims: Sequence[NodeClaim],
        instance_types: builtins.list[InstanceType],
        node_class: NodeClass,
        *,
        placement: GangPlacement | None = None,
    ) -> builtins.list[Instance]:
        """Launch one instance per claim, all of one offering (one instance type, one zone, one capacity
        type), or none. The offerings are those every claim allows among `instance_types`, tried in the
        launch order (provisioner.cloudprovider.launch_order); an offering that cannot take all the
        claims at once is skipped. Returns the Instances in claim order. Idempotent by claim names:
        a second call for claims already launched returns their instances; claims that have one keep it
        and the others launch in its offering and placement group (a member replaced beside its gang).

        All or nothing: when no offering takes the whole group, raises InsufficientCapacity naming
        every offering tried, with nothing left running (a cloud answer that ends partial has its
        launched members terminated before the raise). Also raises CreateError, NodeClassNotReady."""
        ...

    def collect_placement(self, *, older_than: datetime) -> builtins.list[str]:
        """Delete the placement groups (AWS) or compact placement policies (GCP) this cluster created for
        gangs that no live instance is in any more, created before `older_than` (a group made for a
        launch under way is not yet used); returns their names. Garbage collection calls it."""
        ...

    def delete(self, provider_id: str) -> None:
        """Terminate. Raises NotFound when the instance is already gone."""
        ...

    def get(self, provider_id: str) -> Instance:
        """The instance. Raises NotFound."""
        ...

    def list(self) -> builtins.list[Instance]:
        """Every live instance this controller's cluster owns (by tag or label)."""
        ...

    def is_drifted(self, claim: NodeClaim, node_class: NodeClass) -> str | None:
        """A reason when the instance no longer matches its NodeClass (e.g. AMI changed), else None."""
        ...

    def interruptions(self) -> builtins.list[InterruptionEvent]:
        """Interruption events received since the last call (acknowledged once returned)."""
        ...
