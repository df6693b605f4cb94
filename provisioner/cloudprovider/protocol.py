"""The CloudProvider protocol: the whole surface the controllers use to spend and stop spending money."""

from __future__ import annotations

import builtins
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
