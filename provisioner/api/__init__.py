"""The API: pydantic models of every CRD (group `provisioner.sh`, version `v1`), well-known labels,
quantities and durations. Pure: imports no SDK, reads no clock.
"""

from provisioner.api.common import Condition, ObjectMeta, Operator, Requirement, Taint
from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import AWSNodeClass, GCPNodeClass, NodeClass
from provisioner.api.nodepool import NodePool
from provisioner.api.team import Department, Team

KINDS: dict[str, type[NodePool | NodeClaim | NodeClass | Department | Team]] = {
    "NodePool": NodePool,
    "NodeClaim": NodeClaim,
    "AWSNodeClass": AWSNodeClass,
    "GCPNodeClass": GCPNodeClass,
    "Department": Department,
    "Team": Team,
}
"""Our kinds (group `provisioner.sh`) -> their models: each is a row of the tracked kinds' table
(`provisioner.api.kinds.TRACKED`), which says where it lives in the API."""

__all__ = [
    "KINDS",
    "AWSNodeClass",
    "Condition",
    "Department",
    "GCPNodeClass",
    "NodeClaim",
    "NodeClass",
    "NodePool",
    "ObjectMeta",
    "Operator",
    "Requirement",
    "Taint",
    "Team",
]
