"""Node repair, as Karpenter defines it: which nodes to replace because a node condition has stayed
unhealthy past its toleration, and which repairs wait.

A repair policy names a node condition, the status that is unhealthy and how long it is tolerated
(Karpenter's cloud providers give them: `Ready` False or Unknown for 30 minutes, the EKS node monitoring
agent's `AcceleratedHardwareReady` False for 10 minutes). A GPU node also counts as unhealthy when the
NVIDIA device plugin withdrew GPUs it had (allocatable `nvidia.com/gpu` below capacity: the plugin's
health check marks a GPU with an XID error unhealthy), tolerated 10 minutes. A pool with more than 20% of
its nodes unhealthy repairs none (a zone or network outage is not fixed by replacing nodes, as
Karpenter's health controller does), and the repairs of a pool stay within those of its disruption
budgets that apply to every reason. Pure: the controller (provisioner.controllers.repair) gives `now`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from provisioner.api import NodeClaim, NodePool
from provisioner.api import labels as wk
from provisioner.disruption.budgets import budget_active
from provisioner.state.objects import Node

GPUS_WITHDRAWN = "GPUsWithdrawn"
"""The pseudo-condition of a GPU node whose device plugin advertises fewer GPUs than it has."""
MAX_UNHEALTHY_FRACTION = 0.2
"""Above this share of a pool's nodes unhealthy, the pool repairs none (Karpenter's 20%)."""


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """A node condition type, the status that is unhealthy, and how long it is tolerated."""

    condition: str
    status: str
    toleration: timedelta


DEFAULT_POLICIES = (
    RepairPolicy("Ready", "False", timedelta(minutes=30)),
    RepairPolicy("Ready", "Unknown", timedelta(minutes=30)),
    RepairPolicy("AcceleratedHardwareReady", "False", timedelta(minutes=10)),
    RepairPolicy(GPUS_WITHDRAWN, "True", timedelta(minutes=10)),
)


@dataclass(frozen=True, slots=True)
class Unhealthy:
    """A node with an unhealthy condition: since when, and whether its toleration has run out."""

    node: str
    claim: str
    nodepool: str
    condition: str
    status: str
    since: datetime
    due: bool


@dataclass(frozen=True, slots=True)
class RepairPlan:
    repair: tuple[Unhealthy, ...]
    """Nodes to replace now."""
    held: Mapping[str, str]
    """Pool -> why its due repairs wait (too many unhealthy, or its budget)."""


def _parse(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def conditions_of(
    node: Node, gpus_withdrawn_since: datetime | None
) -> dict[str, tuple[str, datetime | None]]:
    """Condition type -> (status, last transition) as the Node reports them, plus `GPUsWithdrawn`."""
    out: dict[str, tuple[str, datetime | None]] = {}
    for c in (node.raw.get("status") or {}).get("conditions") or ():
        out[str(c.get("type"))] = (str(c.get("status", "Unknown")), _parse(c.get("lastTransitionTime")))
    if gpus_withdrawn_since is not None:
        out[GPUS_WITHDRAWN] = ("True", gpus_withdrawn_since)
    return out


def gpus_withdrawn(node: Node) -> bool:
    """The device plugin advertises fewer GPUs than the node has (an unhealthy GPU was withdrawn)."""
    have = node.capacity.get(wk.GPU_RESOURCE, 0)
    return have > 0 and node.allocatable.get(wk.GPU_RESOURCE, 0) < have


def assess(
    nodes: Iterable[tuple[Node, NodeClaim]],
    *,
    policies: Iterable[RepairPolicy],
    now: datetime,
    withdrawn_since: Mapping[str, datetime],
) -> list[Unhealthy]:
    """Every node with a condition a policy calls unhealthy (the first policy that matches)."""
    rules = list(policies)
    out: list[Unhealthy] = []
    for node, claim in nodes:
        seen = conditions_of(node, withdrawn_since.get(node.name))
        for rule in rules:
            status, since = seen.get(rule.condition, (None, None))
            if status != rule.status:
                continue
            since = since or node.created or now
            out.append(
                Unhealthy(
                    node=node.name,
                    claim=claim.name,
                    nodepool=claim.nodepool or "",
                    condition=rule.condition,
                    status=status,
                    since=since,
                    due=now - since >= rule.toleration,
                )
            )
            break
    return out


def _budget_room(pool: NodePool | None, total: int, disrupting: int, now: datetime) -> int | None:
    if pool is None:
        return None
    limits = [
        b.max_nodes(total)
        for b in pool.spec.disruption.budgets
        if not b.reasons and budget_active(b, now)  # a budget for every reason covers repair too
    ]
    return None if not limits else max(0, min(limits) - disrupting)


def plan(
    unhealthy: Iterable[Unhealthy],
    *,
    pools: Mapping[str, NodePool],
    totals: Mapping[str, int],
    disrupting: Mapping[str, int],
    now: datetime,
) -> RepairPlan:
    """Which due repairs go now: none in a pool with more than 20% of its nodes unhealthy, and at most
    what its budgets leave, oldest failure first."""
    by_pool: dict[str, list[Unhealthy]] = {}
    for u in unhealthy:
        by_pool.setdefault(u.nodepool, []).append(u)
    repair: list[Unhealthy] = []
    held: dict[str, str] = {}
    for name, found in sorted(by_pool.items()):
        due = sorted((u for u in found if u.due), key=lambda u: (u.since, u.node))
        if not due:
            continue
        total = max(totals.get(name, 0), len(found))
        if len(found) > math.ceil(MAX_UNHEALTHY_FRACTION * total):  # rounded up, so a 1-node pool repairs
            held[name] = (
                f"{len(found)} of {total} nodes of pool {name} are unhealthy (more than "
                f"{MAX_UNHEALTHY_FRACTION:.0%}): not repairing, replacing them would not help"
            )
            continue
        room = _budget_room(pools.get(name), total, disrupting.get(name, 0), now)
        if room is not None and room < len(due):
            held[name] = f"pool {name}'s disruption budget allows {room} more node(s) disrupted now"
            due = due[:room]
        repair.extend(due)
    return RepairPlan(repair=tuple(repair), held=held)
