"""The claim builder: the NodeClaim a scheduler decision becomes, written the same way by provisioning
(new capacity) and disruption (replacements)."""

from __future__ import annotations

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.controllers.provider_set import node_class_of
from provisioner.scheduling.results import NewClaim
from provisioner.state import Snapshot


def build_nodeclaim(new: NewClaim, snap: Snapshot, *, suffix: str) -> NodeClaim:
    """Named `POOL-SUFFIX`, with the drift hashes of the pool and its NodeClass (as the snapshot holds
    them) and the offering the scheduler planned (the launch may still fall back)."""
    ref = new.nodepool.spec.template.spec.node_class_ref
    claim = new.to_nodeclaim(
        f"{new.nodepool.name}-{suffix}", node_class=node_class_of(snap, ref.kind, ref.name)
    )
    claim.metadata.annotations[wk.PLANNED_OFFERING] = (
        f"{new.instance_type.name}/{new.offering.zone}/{new.offering.capacity_type}"
    )
    return claim
