"""The API: pydantic models of every CRD (group `provisioner.sh`, version `v1`), well-known labels,
quantities and durations. Pure: imports no SDK, reads no clock. The NodeClass kinds are the installed
provider plug-ins' (provisioner.api.plugins); `KINDS` reads them on first use.
"""

from collections.abc import Mapping

from provisioner.api import plugins
from provisioner.api.common import Condition, ObjectMeta, Operator, Requirement, Taint
from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import NODECLASS_MODELS, NodeClass
from provisioner.api.nodepool import NodePool
from provisioner.api.team import Department, Team


def _kinds(
    _found: tuple[plugins.Declares, ...],
) -> Mapping[str, type[NodePool | NodeClaim | NodeClass | Department | Team]]:
    return {
        "NodePool": NodePool,
        "NodeClaim": NodeClaim,
        **NODECLASS_MODELS,
        "Department": Department,
        "Team": Team,
    }


KINDS: plugins.Derived[type[NodePool | NodeClaim | NodeClass | Department | Team]] = plugins.Derived(_kinds)
"""Our kinds (group `provisioner.sh`) -> their models, the installed plug-ins' NodeClass kinds included:
each is a row of the tracked kinds' table (`provisioner.api.kinds.TRACKED`), which says where it lives in
the API."""

__all__ = [
    "KINDS",
    "Condition",
    "Department",
    "NodeClaim",
    "NodeClass",
    "NodePool",
    "ObjectMeta",
    "Operator",
    "Requirement",
    "Taint",
    "Team",
]
