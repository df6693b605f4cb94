"""NodePool status: resources in use and node count, and the conditions Ready, NodeClassReady and
LimitsReached. Written only when something changed, so a quiet cluster makes no API calls; worked out
only when a NodeClaim, NodePool or NodeClass was written (or a status write failed), so a quiet cluster
costs a pass nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from provisioner.api import NodeClaim, NodePool, quantities
from provisioner.api.common import Condition
from provisioner.api.kinds import NODECLASS_KINDS
from provisioner.api.quantities import ResourceList
from provisioner.clusterapi import ClusterError
from provisioner.controllers.conditions import set_condition
from provisioner.controllers.provider_set import node_class_of
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.watch import Watch
from provisioner.state import Snapshot

log = logging.getLogger(__name__)


def _node_class_ready(snap: Snapshot, pool: NodePool) -> tuple[bool, str]:
    ref = pool.spec.template.spec.node_class_ref
    nc = node_class_of(snap, ref.kind, ref.name)
    if nc is None:
        return False, f"{ref.kind} {ref.name} not found"
    status = getattr(nc, "status", None)
    for c in getattr(status, "conditions", None) or []:
        if c.type == "Ready" and c.status.value == "False":
            return False, c.message or f"{ref.kind} {ref.name} is not ready"
    return True, ""


@dataclass(frozen=True, slots=True)
class _ClaimFacts:
    """What a pass needs of one claim: its phase, pool, $/h and capacity (base units)."""

    claim: NodeClaim
    """The claim they were read from: a snapshot hands back the same object while it is unchanged."""
    phase: str
    pool: str
    price: float
    capacity: ResourceList


def _facts(claim: NodeClaim) -> _ClaimFacts:
    # Launched: the instance's capacity; in flight: the estimate.
    return _ClaimFacts(
        claim=claim,
        phase=_phase(claim),
        pool=claim.nodepool or "",
        price=claim.status.price_per_hour or 0.0,
        capacity=claim.status.capacity_amounts() or claim.status.allocatable_amounts(),
    )


@dataclass(kw_only=True, eq=False)
class NodePoolStatusController(Reconciler):
    _facts: dict[str, _ClaimFacts] = field(default_factory=dict, init=False)
    """Claim -> its facts as last read, redone only for a claim that changed since."""
    _watch: Watch = field(init=False)
    _failed: bool = field(default=False, init=False)
    """A status write failed in the last pass: the next one works it out again, changed or not."""

    def __post_init__(self) -> None:
        # What a pool's status is made of: its claims (usage), itself (limits) and its NodeClass (Ready).
        self._watch = Watch(self.state, ("NodeClaim", "NodePool", *NODECLASS_KINDS), owns=self.owns)

    def reconcile(self, now: datetime) -> None:
        if not self._watch.take() and not self._failed:
            return
        self._failed = False
        snap = self.state.snapshot()
        facts = self._read(snap)
        self._claim_metrics(facts)
        usage_by_pool = _pool_usage(facts)
        for pool in snap.nodepools:
            usage = usage_by_pool.get(pool.name) or {"nodes": 0}
            resources = {
                k: (str(v) if k == "nodes" else quantities.format_quantity(k, v))
                for k, v in sorted(usage.items())
            }
            ready, why = _node_class_ready(snap, pool)
            limits = pool.spec.limits_base_units()
            if "nodes" in pool.spec.limits:
                limits["nodes"] = int(quantities.parse_quantity(pool.spec.limits["nodes"]))
            reached = [k for k, lim in limits.items() if usage.get(k, 0) >= lim]
            current: list[Condition] = list(pool.status.conditions) if pool.status else []
            conds = set_condition(
                current,
                "NodeClassReady",
                ready,
                reason="Ready" if ready else "NotFound",
                message=why,
                now=now,
            )
            conds = set_condition(
                [Condition.model_validate(c) for c in conds],
                "LimitsReached",
                bool(reached),
                reason="LimitsReached" if reached else "WithinLimits",
                message=", ".join(sorted(reached)),
                now=now,
            )
            conds = set_condition(
                [Condition.model_validate(c) for c in conds],
                "Ready",
                ready,
                reason="Ready" if ready else "NodeClassNotReady",
                message=why,
                now=now,
            )
            old = pool.status.model_dump(by_alias=True, exclude_none=True, mode="json") if pool.status else {}
            if old.get("resources") == resources and _same(old.get("conditions") or [], conds):
                continue
            # A merge patch only adds and replaces keys: resources the pool no longer has are sent as null.
            gone: dict[str, Any] = {k: None for k in old.get("resources") or {} if k not in resources}
            status: dict[str, Any] = {"resources": {**gone, **resources}, "conditions": conds}
            try:
                self.cluster.patch_nodepool_status(pool.name, status)
            except ClusterError as err:
                self._failed = True
                log.warning("NodePool %s: cannot write status: %s", pool.name, err)

    def _read(self, snap: Snapshot) -> list[_ClaimFacts]:
        """Every claim's facts, in the snapshot's order."""
        known = self._facts
        out: list[_ClaimFacts] = []
        for sn in snap.nodes:
            claim = sn.claim
            if claim is None:
                continue
            facts = known.get(claim.name)
            if facts is None or facts.claim is not claim:
                facts = _facts(claim)
            out.append(facts)
        self._facts = {f.claim.name: f for f in out}
        return out

    def _claim_metrics(self, facts: list[_ClaimFacts]) -> None:
        counts: dict[tuple[str, str], int] = {}
        cost: dict[str, float] = {}
        for f in facts:
            counts[(f.phase, f.pool)] = counts.get((f.phase, f.pool), 0) + 1
            if f.price:
                cost[f.pool] = cost.get(f.pool, 0.0) + f.price
        # Computed first, swapped in at once, so a scrape rarely sees a half-written set.
        self.metrics.nodeclaims.clear()
        for (phase, pool), n in counts.items():
            self.metrics.nodeclaims.labels(phase=phase, nodepool=pool).set(n)
        self.metrics.cost_per_hour.clear()
        for pool, dollars in cost.items():
            self.metrics.cost_per_hour.labels(nodepool=pool).set(dollars)


def _phase(claim: NodeClaim) -> str:
    if claim.metadata.deletion_timestamp is not None:
        return "Terminating"
    done = {c.type for c in claim.status.conditions if c.status.value == "True"}
    for phase in ("Initialized", "Registered", "Launched"):
        if phase in done:
            return phase
    return "Pending"


def _pool_usage(facts: list[_ClaimFacts]) -> dict[str, ResourceList]:
    """Pool -> the capacity of its claims (launched: the instance's; in flight: the estimate) and `nodes`."""
    out: dict[str, ResourceList] = {}
    for f in facts:
        total = out.get(f.pool)
        if total is None:
            total = out[f.pool] = {"nodes": 0}
        total["nodes"] += 1
        for name, amount in f.capacity.items():
            total[name] = total.get(name, 0) + amount
    return out


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    def key(c: dict[str, Any]) -> tuple[str, str, str, str]:
        return (c.get("type", ""), c.get("status", ""), c.get("reason", ""), c.get("message", ""))

    return sorted(map(key, a)) == sorted(map(key, b))
