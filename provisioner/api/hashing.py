"""Drift hashes: a short digest of a NodePool's template and of a NodeClass's spec.

Every NodeClaim is stamped with them when it is built (`NewClaim.to_nodeclaim`) (annotations `provisioner.sh/nodepool-hash` and
`provisioner.sh/nodeclass-hash`); the disruption planner recomputes them and calls a node drifted when
either differs. Requirements are left out of the pool hash, as in Karpenter: a requirement change drifts
only the nodes whose labels no longer satisfy it (checked separately), not every node of the pool.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from provisioner.api.nodeclass import NodeClass
from provisioner.api.nodepool import NodePool


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def nodepool_hash(pool: NodePool) -> str:
    """Digest of the pool's template (labels, annotations, taints, startup taints, NodeClass ref,
    expireAfter, termination grace period), requirements excluded."""
    template = pool.spec.template.to_dict()
    template.get("spec", {}).pop("requirements", None)
    return _digest(template)


def nodeclass_hash(node_class: NodeClass) -> str:
    """Digest of the NodeClass spec (status excluded: the controller writes it)."""
    return _digest(node_class.spec.to_dict())
