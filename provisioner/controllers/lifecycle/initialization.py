"""The initialization step: a registered NodeClaim's Node is ready for pods (Karpenter's
`lifecycle/initialization.go`).

Initialized means the Node is Ready, the start-up taints and the known ephemeral taints (not-ready,
uninitialized, ...: `scheduling.existing.EPHEMERAL_TAINTS`) are gone (removed by their owners), and every
extended resource the claim asked for (`nvidia.com/gpu`, or the `nvidia.com/mig-<profile>` slices the MIG
manager makes once it applied the pool's layout: pending until then) is allocatable. Then the Node gets
`provisioner.sh/initialized` and the claim `Initialized=True`; until then `Initialized=False` says what is
missing (written when that changes). A GPU node that never gets there is the liveness step's.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.api import NodeClaim, quantities
from provisioner.api import labels as wk
from provisioner.api.nodeclaim import INITIALIZED, REGISTERED
from provisioner.controllers.conditions import condition_status
from provisioner.controllers.lifecycle.step import Pass, Step, extended_resources, log, step_condition
from provisioner.scheduling.existing import ephemeral
from provisioner.state.objects import Node


def pending(claim: NodeClaim) -> bool:
    """Launched and registered, not initialized yet: this step's claims."""
    return (
        bool(claim.status.provider_id)
        and condition_status(claim, REGISTERED) == "True"
        and condition_status(claim, INITIALIZED) != "True"
    )


def missing(claim: NodeClaim, node: Node) -> list[str]:
    """What the Node still lacks to be initialized, in words; [] when nothing."""
    lacking: list[str] = []
    if not node.ready:
        lacking.append("node not Ready")
    left = [
        t.key
        for t in node.taints
        if claim.spec.is_startup_taint(t.key, t.effect) or t.key == wk.UNREGISTERED_TAINT
    ]
    if left:
        lacking.append("start-up taints still present: " + ", ".join(left))
    # As Karpenter: not before the taints a starting node carries are gone (not-ready, until the
    # node-lifecycle controller sees it Ready; uninitialized, until the cloud controller manager is done).
    # Initialized, the node's taints count as they are, and a pod placed there would wait behind them.
    starting = sorted({t.key for t in node.taints if t.key != wk.UNREGISTERED_TAINT and ephemeral(t)})
    if starting:
        lacking.append("known ephemeral taints still present: " + ", ".join(starting))
    requested = quantities.parse_resource_list(claim.spec.resources.requests)
    for name in extended_resources(claim.spec.resources.requests):
        if node.allocatable.get(name, 0) < max(1, requested.get(name, 0)):
            lacking.append(
                f"{name} not allocatable ({node.allocatable.get(name, 0)} of {requested.get(name, 0)})"
            )
    return lacking


@dataclass(kw_only=True, eq=False)
class Initialization(Step):
    def reconcile(self, claim: NodeClaim, p: Pass) -> bool:
        node, now = p.node_of(claim), p.now
        if node is None or not pending(claim):
            return False  # a Node gone away: garbage collection handles claims whose instance is gone
        lacking = missing(claim, node)
        if not lacking:
            self.cluster.patch_node(node.name, {"metadata": {"labels": {wk.INITIALIZED: "true"}}})
            conditions = step_condition(
                claim.status.conditions, INITIALIZED, True, reason="Initialized", now=now
            )
            self.cluster.patch_nodeclaim_status(claim.name, {"conditions": conditions})
            log.info("NodeClaim %s initialized (Node %s)", claim.name, node.name)
            return False
        message = "; ".join(lacking)
        current = next((c for c in claim.status.conditions if c.type == INITIALIZED), None)
        if current is None or current.message != message:
            conditions = step_condition(
                claim.status.conditions, INITIALIZED, False, reason="NotInitialized", message=message, now=now
            )
            self.cluster.patch_nodeclaim_status(claim.name, {"conditions": conditions})
        return False
