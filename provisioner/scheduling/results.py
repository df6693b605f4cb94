"""What a solve returns: every pod in exactly one of placed on existing or in-flight capacity, placed
on a new NodeClaim, or unschedulable with one reason per pool considered.

These types are the contract between the scheduler and its users (provisioning controller, simulator,
`explain`, disruption's re-solve). Extend them; do not rename their fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioner.api import NodeClaim, NodePool, quantities
from provisioner.api import labels as wk
from provisioner.api.common import NodeClassReference, ObjectMeta, Requirement
from provisioner.api.hashing import nodeclass_hash, nodepool_hash
from provisioner.api.nodeclaim import NodeClaimSpec, ResourceRequirements
from provisioner.api.nodeclass import NodeClass
from provisioner.api.quantities import ResourceList
from provisioner.cloudprovider.types import InstanceType, Offering
from provisioner.state.objects import Pod


@dataclass(slots=True)
class Placement:
    """A pod placed on capacity that exists or is already in flight."""

    pod: Pod
    node: str
    """StateNode name: a Node name, or a NodeClaim name for a claim in flight."""


@dataclass(slots=True)
class NewClaim:
    """A node to launch."""

    hostname: str
    """Placeholder name inside this solve (topology and anti-affinity use it as the node's hostname)."""
    nodepool: NodePool
    requirements: list[Requirement]
    """Narrowed requirements, including `node.kubernetes.io/instance-type In [options...]`."""
    instance_types: list[InstanceType]
    """Launch options, cheapest available first, at most 60."""
    offering: Offering
    """The chosen offering of `instance_types[0]`: the first available, cheapest."""
    pods: list[Pod] = field(default_factory=list)
    requests: ResourceList = field(default_factory=dict)
    """Pods' requests plus the overhead of the daemonsets that will run on the node."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels the node gets besides the pool's template labels: one value for each key the pool's
    requirements define and no type or offering sets (also pinned in `requirements`)."""
    gang: str = ""
    """The gang (`namespace/name`) whose members it holds, empty for none: launched with the gang's other
    new claims as one group (`CloudProvider.create_group`), all or none."""
    gang_size: int = 0
    """With `gang`: how many new claims the gang's launch holds."""

    @property
    def instance_type(self) -> InstanceType:
        return self.instance_types[0]

    @property
    def price(self) -> float:
        return self.offering.price

    def to_nodeclaim(self, name: str, *, node_class: NodeClass | None = None) -> NodeClaim:
        """The NodeClaim to write: pool label, the pool's taints, the options as requirements, the finalizer,
        and the drift hashes of the pool's template and (when given) of its NodeClass."""
        template = self.nodepool.spec.template
        annotations = {**template.metadata.annotations, wk.NODEPOOL_HASH: nodepool_hash(self.nodepool)}
        if node_class is not None:
            annotations[wk.NODECLASS_HASH] = nodeclass_hash(node_class)
        if self.gang:
            annotations[wk.GANG] = self.gang
            annotations[wk.GANG_SIZE] = str(self.gang_size)
        return NodeClaim(
            metadata=ObjectMeta(
                name=name,
                labels={**template.metadata.labels, **self.labels, wk.NODEPOOL: self.nodepool.name},
                annotations=annotations,
                finalizers=[wk.TERMINATION_FINALIZER],
            ),
            spec=NodeClaimSpec(
                node_class_ref=NodeClassReference.model_validate(template.spec.node_class_ref.model_dump()),
                requirements=list(self.requirements),
                resources=ResourceRequirements(
                    requests={k: quantities.format_quantity(k, v) for k, v in sorted(self.requests.items())}
                ),
                taints=list(template.spec.taints),
                startup_taints=list(template.spec.startup_taints),
                expire_after=template.spec.expire_after,
                termination_grace_period=template.spec.termination_grace_period,
            ),
        )


@dataclass(frozen=True, slots=True)
class PoolReason:
    """Why one pool could not take a pod, in plain words."""

    nodepool: str
    reason: str


@dataclass(slots=True)
class Unschedulable:
    pod: Pod
    reasons: list[PoolReason]


@dataclass(frozen=True, slots=True)
class GangOutcome:
    """What a solve decided for one gang (a Kueue pod group or a ProvisioningRequest's pods)."""

    name: str
    """`namespace/name` of the group."""
    total: int
    """How many pods the whole gang has."""
    members: tuple[str, ...]
    """Keys of its pods in this solve."""
    running: int
    """Members already bound to nodes (not in this solve)."""
    state: str
    """`Placed` (every member placed, new nodes in one zone), `Waiting` (not all of its pods exist yet)
    or `Unschedulable` (it cannot be placed whole: nothing is launched for any member)."""
    zone: str | None = None
    """The zone its members are placed in (Placed), or the zone that came closest (Unschedulable)."""
    nodepool: str | None = None
    """The pool of its new nodes (or of the closest attempt)."""
    new_nodes: int = 0
    """New NodeClaims launched for it as one group."""
    fitting: int = 0
    """Members that found room in the closest attempt (all of them when Placed)."""
    reason: str = ""
    """Why it is not Placed, in plain words."""
    avoided_per_hour: float = 0.0
    """Not Placed: the $/h of the new nodes a one-at-a-time launch would have started for the members
    that fit (nodes billed while the gang cannot run), which all-or-nothing did not launch."""


@dataclass(slots=True)
class Results:
    placements: list[Placement] = field(default_factory=list)
    new_claims: list[NewClaim] = field(default_factory=list)
    unschedulable: list[Unschedulable] = field(default_factory=list)
    gangs: list[GangOutcome] = field(default_factory=list)
    """One per gang among the solved pods (empty when none), by name."""

    @property
    def cost_per_hour(self) -> float:
        """$/h of the new claims."""
        return sum(c.price for c in self.new_claims)
