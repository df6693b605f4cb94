"""Disruption, pure: which nodes to remove or replace now, and why the others stay.

`plan(snapshot, instance_types=..., now=..., settings=...)` returns a `DisruptionPlan` of `Command`s,
each with the `NodeRecord` of every node it removes, and a `Blocker` for every node considered and kept. The live
controller re-plans after a validation delay and acts; the FinOps ledger stores the records. A caller
that plans the same cluster again and again hands every plan the same `Memory`, so each costs what
changed since the last (the plans are the same without it).
"""

from provisioner.api.hashing import nodeclass_hash, nodepool_hash
from provisioner.disruption.context import PlannerSettings
from provisioner.disruption.memory import Memory
from provisioner.disruption.model import Blocker, BlockerKind, Command, DisruptionPlan, NodeRecord, PodMove
from provisioner.disruption.planner import plan

__all__ = [
    "Blocker",
    "BlockerKind",
    "Command",
    "DisruptionPlan",
    "Memory",
    "NodeRecord",
    "PlannerSettings",
    "PodMove",
    "nodeclass_hash",
    "nodepool_hash",
    "plan",
]
