"""Which new pods get the admission gate, as a JSON patch (RFC 6902) the mutating webhook answers.

A pod is gated when its namespace belongs to a team, unless it is already bound (`spec.nodeName`: the
scheduler is bypassed, nothing to hold), a DaemonSet's (it follows its nodes), or already gated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provisioner.api import labels as wk
from provisioner.api.team import Team


def gate_patch(pod: Mapping[str, Any], team: Team | None) -> list[dict[str, Any]] | None:
    """The JSON patch that adds the admission gate to a pod being created, or None to leave it."""
    if team is None:
        return None
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return None
    owners = (pod.get("metadata") or {}).get("ownerReferences") or ()
    if any(o.get("kind") == "DaemonSet" for o in owners if isinstance(o, Mapping)):
        return None
    gates = spec.get("schedulingGates")
    gate = {"name": wk.ADMISSION_GATE}
    if not gates:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [gate]}]
    if any(isinstance(g, Mapping) and g.get("name") == wk.ADMISSION_GATE for g in gates):
        return None
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate}]
