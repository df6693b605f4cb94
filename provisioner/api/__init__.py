"""The API: pydantic models of every CRD (group `provisioner.sh`, version `v1`), well-known labels,
quantities and durations. Pure: imports no SDK, reads no clock.
"""

from provisioner.api.common import Condition, ObjectMeta, Operator, Requirement, Taint
from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import AWSNodeClass, GCPNodeClass, NodeClass
from provisioner.api.nodepool import NodePool

KINDS = {
    "NodePool": NodePool,
    "NodeClaim": NodeClaim,
    "AWSNodeClass": AWSNodeClass,
    "GCPNodeClass": GCPNodeClass,
}

__all__ = [
    "KINDS",
    "AWSNodeClass",
    "Condition",
    "GCPNodeClass",
    "NodeClaim",
    "NodeClass",
    "NodePool",
    "ObjectMeta",
    "Operator",
    "Requirement",
    "Taint",
]
