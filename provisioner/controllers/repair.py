"""Node repair: a node whose condition stays unhealthy past its toleration (`Ready` False or Unknown for
30 minutes, `AcceleratedHardwareReady` False or GPUs withdrawn by the NVIDIA device plugin for 10) is
replaced: its NodeClaim is deleted with the disruption reason `Unhealthy`, so termination drains it
(PodDisruptionBudgets honoured, `do-not-disrupt` not: the node is broken) and its pods are provisioned
again. What to repair is decided by provisioner.disruption.repair (no pool repairs when more than 20% of
its nodes are unhealthy; a pool's repairs stay within its budgets). Only initialized nodes are repaired:
one still coming up is the lifecycle controller's, with its own timeouts.

Each repair has an Event (`NodeRepair`, on the NodeClaim), the metric `provisioner_node_repairs_total`,
and a ledger row (reason and method `repair`, no saving: the node is replaced, not saved), carried on the
claim until it is stored, as disruption's rows are. A pool whose repairs wait gets one `RepairBlocked`
Event per reason.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.api.nodeclaim import INITIALIZED
from provisioner.clusterapi import ClusterError, NotFoundError
from provisioner.controllers.conditions import condition_status
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.watch import Watch
from provisioner.disruption.repair import (
    DEFAULT_POLICIES,
    RepairPolicy,
    Unhealthy,
    assess,
    gpus_withdrawn,
    plan,
)
from provisioner.finops.recorder import LedgerRecorder
from provisioner.finops.rows import ActionRow, actions_to_json
from provisioner.state.objects import Node

log = logging.getLogger(__name__)

REASON = "Unhealthy"
"""The claim's disruption reason (termination treats it as involuntary)."""


@dataclass(kw_only=True, eq=False)
class RepairController(Reconciler):
    recorder: LedgerRecorder | None = None
    """The ledger recorder; None keeps no ledger."""
    policies: tuple[RepairPolicy, ...] = DEFAULT_POLICIES
    _withdrawn: dict[str, datetime] = field(default_factory=dict, init=False)
    """Node -> when we first saw its device plugin advertise fewer GPUs than it has."""
    _held_said: dict[str, str] = field(default_factory=dict, init=False)
    _watch: Watch = field(init=False)
    _busy: bool = field(default=True, init=False)
    """The last pass saw an unhealthy node: the next one looks again, written or not (a toleration runs
    out, a budget window opens, on time alone)."""

    def __post_init__(self) -> None:
        self._watch = Watch(self.state, ("Node", "NodeClaim", "NodePool"), owns=self.owns)

    def reconcile(self, now: datetime) -> None:
        # No node unhealthy last pass and no Node, claim or pool written since: none is now.
        if not self._watch.take() and not self._busy:
            return
        snap = self.state.snapshot()
        pairs: list[tuple[Node, NodeClaim]] = []
        totals: dict[str, int] = {}
        disrupting: dict[str, int] = {}
        withdrawn: dict[str, datetime] = {}
        for sn in snap.nodes:
            claim, node = sn.claim, sn.node
            if claim is None:
                continue
            pool = claim.nodepool or ""
            totals[pool] = totals.get(pool, 0) + 1
            if claim.metadata.deletion_timestamp is not None or (node is not None and node.deleting):
                disrupting[pool] = disrupting.get(pool, 0) + 1
                continue
            if node is None or condition_status(claim, INITIALIZED) != "True":
                continue  # not up yet: the lifecycle controller's timeouts deal with it
            if gpus_withdrawn(node):
                withdrawn[node.name] = self._withdrawn.get(node.name, now)
            pairs.append((node, claim))
        self._withdrawn = withdrawn
        unhealthy = assess(pairs, policies=self.policies, now=now, withdrawn_since=withdrawn)
        self._busy = bool(unhealthy)
        result = plan(
            unhealthy,
            pools={p.name: p for p in snap.nodepools},
            totals=totals,
            disrupting=disrupting,
            now=now,
        )
        for pool, why in result.held.items():
            if self._held_said.get(pool) != why:
                self._held_said[pool] = why
                log.warning("node repair held: %s", why)
                self.cluster.record_event(
                    kind="NodePool", name=pool, reason="RepairBlocked", message=why, type="Warning"
                )
        for gone in set(self._held_said) - set(result.held):
            del self._held_said[gone]
        claims = {c.name: c for _, c in pairs}
        for u in result.repair:
            try:
                self._repair(u, claims[u.claim], now)
            except NotFoundError:
                continue
            except ClusterError as err:
                log.warning("repairing Node %s: %s", u.node, err)

    def _repair(self, u: Unhealthy, claim: NodeClaim, now: datetime) -> None:
        lasted = now - u.since
        message = (
            f"Node {u.node}: {u.condition}={u.status} for {_minutes(lasted)} (tolerated "
            f"{_minutes(next(p.toleration for p in self.policies if p.condition == u.condition))}); replacing it"
        )
        row = ActionRow(
            time=now,
            command_id=f"repair-{uuid.uuid4().hex[:8]}",
            action="delete",
            nodepool=u.nodepool,
            teams=(),
            node=u.node,
            instance_type=claim.status.instance_type or "",
            capacity_type=claim.status.capacity_type or "",
            zone=claim.status.zone or "",
            reason="repair",
            method="repair",
            price_per_hour=claim.status.price_per_hour or 0.0,
            replacement_type=None,
            replacement_capacity_type=None,
            replacement_price_per_hour=0.0,
            savings_per_hour=0.0,
            pods_moved=0,
            detail=message,
        )
        annotations = {wk.DISRUPTION_REASON: REASON}
        if self.recorder is not None:
            annotations[wk.LEDGER_ACTIONS] = actions_to_json([row])
        self.cluster.patch_nodeclaim(claim.name, {"metadata": {"annotations": annotations}})
        self.cluster.delete_nodeclaim(claim.name)
        log.warning("NodeClaim %s: %s", claim.name, message)
        self.cluster.record_event(
            kind="NodeClaim", name=claim.name, reason="NodeRepair", message=message, type="Warning"
        )
        self.metrics.node_repairs.labels(nodepool=u.nodepool, condition=u.condition).inc()
        if self.recorder is not None:
            self.recorder.actions([row])


def _minutes(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds // 60}m{seconds % 60}s"
