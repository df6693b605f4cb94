"""What the planner reads of one node alone, derived once per StateNode instead of once per question.

A plan asks the same things of every node several times (its pods that must move, its pool, whether it is
already disrupting, when a pod last came or went, its place in the consolidation order), and each plan
asks them again of nodes that did not change. A `NodeFacts` answers them for one StateNode, worked out
once; `Facts` keeps them per StateNode.

Exact, not approximate: a StateNode is frozen and ClusterState replaces it (never changes it) when its
Node, NodeClaim or pods change, so facts derived from the very same StateNode object hold for as long as
it lives. Kept across plans by `Memory` (for the nodes of the last plan only), or for one plan without
it. Facts that depend on more than the node (pools, PDBs, time) are the
methods' and `candidates`'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from provisioner.api import NodePool, accelerators, durations
from provisioner.api import labels as wk
from provisioner.disruption import candidates as cand
from provisioner.disruption.model import BlockerKind
from provisioner.disruption.pdbs import PDBLedger
from provisioner.disruption.plan_time import PlanTime
from provisioner.state.cluster import StateNode
from provisioner.state.objects import Pod


class NodeFacts:
    """One StateNode's facts (`node`), worked out when the plan first asks for the node (a few tens of
    microseconds; slots, since the controller keeps one per node of the fleet)."""

    __slots__ = (
        "annotated",
        "daemon_pods",
        "disrupting",
        "drift",
        "empty_since",
        "expires",
        "gpu_idle",
        "last_pod_event",
        "listing",
        "node",
        "nodepool",
        "order",
        "own_blocker",
        "repels",
        "workload",
    )

    def __init__(self, node: StateNode) -> None:
        self.node = node
        self.workload: tuple[Pod, ...] = tuple(cand.reschedulable(node))
        """The pods that must find a new home when the node goes."""
        self.nodepool: str | None = node.nodepool
        self.disrupting: bool = cand.disrupting(node)
        self.last_pod_event: datetime | None = cand.last_pod_event(node)
        self.empty_since: datetime | None = cand.empty_since(node)
        self.expires: tuple[datetime, timedelta] | None = _expires(node)
        """(when the node was created, its claim's `expireAfter`), when it has both."""
        self.gpu_idle: bool = cand.is_gpu_node(node) and not any(
            accelerators.uses_accelerators(p.requests) for p in self.workload
        )
        """A GPU node whose pods use no GPU."""
        self.order: tuple[bool, float, float, str] = (
            not self.gpu_idle,
            cand.disruption_cost(node),
            -node.price,
            node.name,
        )
        """Its place among consolidation candidates: GPU nodes held only by CPU pods first (an idle GPU is
        the largest waste in the fleet), then the cheapest to disrupt, the dearest, by name."""
        self.own_blocker: tuple[BlockerKind, str] | None = cand.own_blocker(node)
        """What keeps the node whatever the rest of the cluster: not initialized, or annotated."""
        self.annotated: tuple[Pod, ...] = tuple(p for p in node.pods if wk.DO_NOT_DISRUPT in p.annotations)
        """Its pods with a do-not-disrupt annotation (whether in force is the clock's)."""
        self.daemon_pods: tuple[Pod, ...] = tuple(
            p for p in node.pods if p.is_daemonset_pod and not p.is_terminal
        )
        """DaemonSet pods that go with the node (their PDBs count)."""
        self.listing: tuple[Pod, ...] = tuple(p for p in self.workload if p.nodepools)
        """Its workload pods that name an ordered pool list (`provisioner.sh/nodepools`)."""
        self.repels: bool = any(p.anti_affinity_required for p in node.pods)
        """Runs a pod with required anti-affinity (it may keep pods of a re-solve away)."""
        self.drift: tuple[tuple[object, ...], str | None] | None = None
        """The last drift verdict on the node (`expiration_drift`) and the pool and hashes it was made
        against."""


def _expires(node: StateNode) -> tuple[datetime, timedelta] | None:
    claim = node.claim
    if claim is None:
        return None
    after = durations.parse_duration(claim.spec.expire_after)
    born = cand.created(node)
    return None if after is None or born is None else (born, after)


class Facts:
    """NodeFacts per StateNode (by identity; each holds its node, so no id is reused while kept)."""

    def __init__(self) -> None:
        self._kept: dict[int, NodeFacts] = {}

    def start(self, nodes: Iterable[StateNode]) -> None:
        """A plan of these nodes begins: the facts of those an earlier plan saw are carried over, all others
        dropped at once (a node replaced since, with its pods, must not outlive the plan that replaced it:
        at 30,000 pods that generation is tens of MiB)."""
        kept = self._kept
        carried: dict[int, NodeFacts] = {}
        for node in nodes:
            found = kept.get(id(node))
            carried[id(node)] = found if found is not None and found.node is node else NodeFacts(node)
        self._kept = carried

    def of(self, node: StateNode) -> NodeFacts:
        found = self._kept.get(id(node))
        if found is None or found.node is not node:
            # A node the plan made (a receiver of moved pods), or one asked about before a plan starts.
            found = self._kept[id(node)] = NodeFacts(node)
        return found


def candidate_blocker(
    facts: NodeFacts,
    pools: dict[str, NodePool],
    *,
    clock: PlanTime,
    pdbs: PDBLedger,
    pending: Sequence[Pod] = (),
) -> tuple[BlockerKind, str] | None:
    """Why the node may not be disrupted at all, or None for a candidate. Only called for owned nodes.

    DaemonSet pods are never moved, but they go with the node: a PDB that selects them and allows no
    eviction keeps the node, whatever method would remove it (Karpenter's candidate filter). The PDBs of
    the pods that move are checked per command, where evictions add up."""
    own = facts.own_blocker
    if own is not None:
        return own
    node = facts.node
    # Only an annotated pod can be protected (`do_not_disrupt`); the first one in force is named.
    pod = next((p for p in facts.annotated if cand.do_not_disrupt(p, clock)), None)
    if pod is not None:
        value = pod.annotations[wk.DO_NOT_DISRUPT]
        until = cand.do_not_disrupt_until(pod)
        lapses = f" until {until.isoformat()}" if until is not None else ""
        return BlockerKind.DO_NOT_DISRUPT_POD, f"pod {pod.key} has {wk.DO_NOT_DISRUPT}={value}{lapses}"
    why = pdbs.blocker(facts.daemon_pods)
    if why is not None:
        return BlockerKind.PDB, why
    waiting = cand.awaited_by(node, pending)
    if waiting is not None:
        where = "on a node being disrupted" if waiting.node_name else "pending"
        return BlockerKind.AWAITED, f"{where} pod {waiting.key} can land on it (capacity launched for it)"
    if facts.nodepool not in pools:
        return BlockerKind.NO_POOL, f"node pool {facts.nodepool!r} does not exist"
    return None
