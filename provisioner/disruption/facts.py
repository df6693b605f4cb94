"""What the planner reads of one node alone, derived once per StateNode instead of once per question.

A plan asks the same things of every node several times (its pods that must move, its pool, whether it is
already disrupting, when a pod last came or went, its place in the consolidation order), and each plan
asks them again of nodes that did not change. A `NodeFacts` answers them for one StateNode, each worked
out on first use; `Facts` keeps them per StateNode.

Exact, not approximate: a StateNode is frozen and ClusterState replaces it (never changes it) when its
Node, NodeClaim or pods change, so facts derived from the very same StateNode object hold for as long as
it lives. Kept across plans by `Memory` (the facts of a node no plan looked at since the last one are
dropped), or for one plan without it. Facts that depend on more than the node (pools, PDBs, time) are the
methods' and `candidates`'.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cached_property

from provisioner.api import durations
from provisioner.api import labels as wk
from provisioner.disruption import candidates as cand
from provisioner.disruption.model import BlockerKind
from provisioner.state.cluster import StateNode
from provisioner.state.objects import Pod


class NodeFacts:
    """One StateNode's facts (`node`); each computed on first use."""

    def __init__(self, node: StateNode) -> None:
        self.node = node
        self.workload: tuple[Pod, ...] = tuple(cand.reschedulable(node))
        """The pods that must find a new home when the node goes."""
        self.nodepool: str | None = node.nodepool

    @cached_property
    def listing(self) -> tuple[Pod, ...]:
        """Its workload pods that name an ordered pool list (`provisioner.sh/nodepools`)."""
        return tuple(p for p in self.workload if p.nodepools)

    @cached_property
    def disrupting(self) -> bool:
        return cand.disrupting(self.node)

    @cached_property
    def last_pod_event(self) -> datetime | None:
        return cand.last_pod_event(self.node)

    @cached_property
    def empty_since(self) -> datetime | None:
        return cand.empty_since(self.node)

    @cached_property
    def expires(self) -> tuple[datetime, timedelta] | None:
        """(when the node was created, its claim's `expireAfter`), when it has both."""
        claim = self.node.claim
        if claim is None:
            return None
        after = durations.parse_duration(claim.spec.expire_after)
        born = cand.created(self.node)
        return None if after is None or born is None else (born, after)

    @cached_property
    def gpu_idle(self) -> bool:
        """A GPU node whose pods use no GPU."""
        return cand.is_gpu_node(self.node) and all(p.gpus == 0 for p in self.workload)

    @cached_property
    def order(self) -> tuple[bool, float, float, str]:
        """Its place among consolidation candidates: GPU nodes held only by CPU pods first (an idle GPU is
        the largest waste in the fleet), then the cheapest to disrupt, the dearest, by name."""
        return (not self.gpu_idle, cand.disruption_cost(self.node), -self.node.price, self.node.name)

    @cached_property
    def own_blocker(self) -> tuple[BlockerKind, str] | None:
        """What keeps the node whatever the rest of the cluster: not initialized, or annotated."""
        return cand.own_blocker(self.node)

    @cached_property
    def annotated(self) -> tuple[Pod, ...]:
        """Its pods with a do-not-disrupt annotation (whether in force is the clock's)."""
        return tuple(p for p in self.node.pods if wk.DO_NOT_DISRUPT in p.annotations)

    @cached_property
    def daemon_pods(self) -> tuple[Pod, ...]:
        """DaemonSet pods that go with the node (their PDBs count)."""
        return tuple(p for p in self.node.pods if p.is_daemonset_pod and not p.is_terminal)

    drift: tuple[tuple[object, ...], str | None] | None = None
    """The last drift verdict on the node (`expiration_drift`) and the pool and hashes it was made against."""

    @cached_property
    def repels(self) -> bool:
        """Runs a pod with required anti-affinity (it may keep pods of a re-solve away)."""
        return any(p.anti_affinity_required for p in self.node.pods)


class Facts:
    """NodeFacts per StateNode (by identity; each holds its node, so no id is reused while kept)."""

    def __init__(self) -> None:
        self._current: dict[int, NodeFacts] = {}
        self._previous: dict[int, NodeFacts] = {}

    def start(self) -> None:
        """A plan begins: facts the last plan did not look at are dropped after this one."""
        self._previous, self._current = self._current, {}

    def of(self, node: StateNode) -> NodeFacts:
        found = self._current.get(id(node))
        if found is None or found.node is not node:
            found = self._carry(node)
        return found

    def _carry(self, node: StateNode) -> NodeFacts:
        """The facts the last plan had of the node, or new ones; kept for this plan."""
        found = self._previous.get(id(node))
        if found is None or found.node is not node:
            found = NodeFacts(node)
        self._current[id(node)] = found
        return found
