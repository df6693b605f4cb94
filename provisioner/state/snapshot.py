"""The frozen Snapshot that decision code reads, its StateNodes (a Node joined with its NodeClaim and the
pods bound to it, or a claim in flight), and `SnapshotNodes`, which keeps a snapshot's nodes from one
snapshot to the next so a new one costs what changed, not the fleet. Pure; `ClusterState` feeds it.

A StateNode joins a Node and its NodeClaim (either may be missing: a claim in flight has no Node yet; a
Node we do not own has no claim), with the pods bound to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from provisioner.api import NodeClaim, NodePool, quantities
from provisioner.api.common import is_true
from provisioner.api.nodeclaim import INITIALIZED
from provisioner.api.nodeclass import NodeClass
from provisioner.api.quantities import ResourceList
from provisioner.api.team import Department, Team, namespace_teams
from provisioner.state.objects import DaemonSet, Node, Pod, PodDisruptionBudget, TaintValue


@dataclass(frozen=True, slots=True, eq=False)
class StateNode:
    """A node or a claim in flight, as capacity the scheduler and the disruption planner can use."""

    name: str
    node: Node | None = None
    claim: NodeClaim | None = None
    pods: tuple[Pod, ...] = ()
    _requested: ResourceList | None = field(default=None, init=False, repr=False, compare=False)
    """What `requested` computed, filled on first use: the instance is frozen, so the sum cannot change,
    and the scheduler and the disruption planner ask for it many times per snapshot."""

    @property
    def labels(self) -> Mapping[str, str]:
        if self.node is not None:
            return self.node.labels
        assert self.claim is not None
        out = dict(self.claim.metadata.labels)
        # A claim in flight carries single-valued requirements (its zone, type, capacity type) as labels.
        for req in self.claim.spec.requirements:
            if req.operator.value == "In" and len(req.values) == 1:
                out.setdefault(req.key, req.values[0])
        return out

    @property
    def taints(self) -> tuple[TaintValue, ...]:
        if self.node is not None:
            return self.node.taints
        assert self.claim is not None
        return tuple(
            TaintValue(key=t.key, effect=t.effect.value, value=t.value) for t in self.claim.spec.taints
        )

    @property
    def allocatable(self) -> ResourceList:
        if self.node is not None and self.node.allocatable:
            return dict(self.node.allocatable)
        if self.claim is not None:
            return self.claim.status.allocatable_amounts()
        return {}

    @property
    def requested(self) -> ResourceList:
        """What the node's running (non-terminal) pods request. Memoised; callers must not mutate it."""
        total = self._requested
        if total is None:
            total = {}
            for pod in self.pods:
                if not pod.is_terminal:
                    for name, amount in pod.requests.items():
                        total[name] = total.get(name, 0) + amount
            object.__setattr__(self, "_requested", total)
        return total

    @property
    def available(self) -> ResourceList:
        return quantities.subtract(self.allocatable, self.requested)

    @property
    def nodepool(self) -> str | None:
        if self.claim is not None:
            return self.claim.nodepool
        return self.node.nodepool if self.node is not None else None

    @property
    def managed(self) -> bool:
        """Owned by the provisioner (has a claim)."""
        return self.claim is not None

    @property
    def initialized(self) -> bool:
        return self.claim is not None and is_true(self.claim.status.conditions, INITIALIZED)

    @property
    def in_flight(self) -> bool:
        return self.node is None

    @property
    def deleting(self) -> bool:
        return (self.node is not None and self.node.deleting) or (
            self.claim is not None and self.claim.metadata.deletion_timestamp is not None
        )

    @property
    def cordoned(self) -> bool:
        return self.node is not None and self.node.unschedulable

    @property
    def price(self) -> float:
        return (self.claim.status.price_per_hour or 0.0) if self.claim is not None else 0.0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A consistent, frozen view of the cluster at one moment."""

    nodes: tuple[StateNode, ...] = ()
    pending_pods: tuple[Pod, ...] = ()
    """Pods not bound to any node and not terminal."""
    unplaced_pods: tuple[Pod, ...] = ()
    """Pods bound to a Node the state does not hold, and not terminal: its watch event has not come yet
    (the pod's came first), or it was deleted with pods still on it. No node here lists them, but they
    take room: quota counts them (`provisioner.quota.usage`). By key."""
    daemonsets: tuple[DaemonSet, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    nodepools: tuple[NodePool, ...] = ()
    nodeclasses: Mapping[tuple[str, str], NodeClass] = field(default_factory=dict)
    """(kind, name) -> NodeClass."""
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Namespace -> its labels (the team label among them)."""
    teams: tuple[Team, ...] = ()
    departments: tuple[Department, ...] = ()

    def team_names(self) -> dict[str, str]:
        """Namespace -> the team its pods belong to (`provisioner.api.team.namespace_teams`)."""
        return namespace_teams(self.teams, self.namespaces)

    def node(self, name: str) -> StateNode | None:
        return next((n for n in self.nodes if n.name == name), None)

    def bound_pods(self) -> Iterable[Pod]:
        for n in self.nodes:
            yield from n.pods


class SnapshotNodes:
    """A snapshot's nodes, kept up to date from the changes `ClusterState` reports: the Nodes and claims
    written and the nodes whose pods changed. Each build looks only at the nodes those can touch (a claim's
    join is by provider id, then by node name, as before) and reuses every other StateNode, and the
    sorted tuple when no entry came or went: a snapshot of a large cluster after a few writes costs the
    writes, not a walk of every node and claim.

    Exactly what a build from scratch gives: every node joined with the last claim (in the claims' order)
    whose provider id is the node's, else whose status names the node; each claim no node joins, in
    flight; sorted by name (a node before a claim in flight of the same name)."""

    def __init__(self) -> None:
        self.nodes_written: set[str] = set()
        self.claims_written: set[str] = set()
        self.pods_moved: set[str] = set()
        """Node names whose bound pods changed."""
        self._entries: dict[tuple[str, int], StateNode] = {}
        """(name, 0 for a Node or 1 for a claim in flight) -> its StateNode."""
        self._sorted: tuple[StateNode, ...] = ()
        self._position: dict[tuple[str, int], int] = {}
        self._join: dict[str, str] = {}
        """Node name -> the claim joined with it."""
        self._joins: dict[str, int] = {}
        """Claim name -> how many nodes join it."""
        self._claim_keys: dict[str, tuple[str | None, str | None]] = {}
        """Claim name -> (provider id, node name) as indexed."""
        self._by_provider: dict[str, set[str]] = {}
        self._by_node_name: dict[str, set[str]] = {}
        self._node_provider: dict[str, str | None] = {}
        self._nodes_by_provider: dict[str, set[str]] = {}

    def build(
        self,
        nodes: Mapping[str, Node],
        claims: Mapping[str, NodeClaim],
        bound: Mapping[str, Mapping[str, Pod]],
        order: Mapping[str, int],
    ) -> tuple[StateNode, ...]:
        """The snapshot's nodes now; `bound`: node name -> its non-terminal pods, `order`: pod key -> its
        place (a node's pods are listed in that order)."""
        touched = set(self.nodes_written) | self.pods_moved
        candidates: set[str] = set()
        for name in self.claims_written:
            candidates.add(name)
            provider_id, node_name = self._claim_keys.pop(name, (None, None))
            touched |= self._unindex(self._by_provider, provider_id, name, self._nodes_by_provider)
            if node_name is not None:
                self._by_node_name[node_name].discard(name)
                touched.add(node_name)
            claim = claims.get(name)
            if claim is not None:
                keys = (claim.status.provider_id or None, claim.status.node_name or None)
                self._claim_keys[name] = keys
                if keys[0] is not None:
                    self._by_provider.setdefault(keys[0], set()).add(name)
                    touched |= self._nodes_by_provider.get(keys[0], set())
                if keys[1] is not None:
                    self._by_node_name.setdefault(keys[1], set()).add(name)
                    touched.add(keys[1])
        for name in self.nodes_written:
            old = self._node_provider.pop(name, None)
            if old is not None:
                self._nodes_by_provider[old].discard(name)
            node = nodes.get(name)
            if node is not None and node.provider_id:
                self._node_provider[name] = node.provider_id
                self._nodes_by_provider.setdefault(node.provider_id, set()).add(name)
        changed: dict[tuple[str, int], StateNode | None] = {}
        rank: dict[str, int] | None = None
        for name in touched:
            before = self._join.pop(name, None)
            if before is not None:
                self._joins[before] -= 1
                candidates.add(before)
            node = nodes.get(name)
            if node is None:
                if (name, 0) in self._entries:
                    changed[(name, 0)] = None
                continue
            # The last claim in the claims' order with the node's provider id, else with its name.
            named = self._by_provider.get(node.provider_id or "") or self._by_node_name.get(name)
            claim = None
            if named:
                if len(named) > 1 and rank is None:
                    rank = {n: i for i, n in enumerate(claims)}
                claim = claims[
                    next(iter(named)) if len(named) == 1 else max(named, key=(rank or {}).__getitem__)
                ]
                self._join[name] = claim.name
                self._joins[claim.name] = self._joins.get(claim.name, 0) + 1
                candidates.add(claim.name)
            last = self._entries.get((name, 0))
            if last is None or last.node is not node or last.claim is not claim or name in self.pods_moved:
                pods = tuple(sorted(bound.get(name, {}).values(), key=lambda p: order[p.key]))
                changed[(name, 0)] = StateNode(name=name, node=node, claim=claim, pods=pods)
        for name in candidates:
            claim = claims.get(name)
            last = self._entries.get((name, 1))
            if claim is None or self._joins.get(name, 0) > 0:
                if last is not None:
                    changed[(name, 1)] = None
            elif last is None or last.claim is not claim:
                changed[(name, 1)] = StateNode(name=name, claim=claim)
        self.nodes_written.clear()
        self.claims_written.clear()
        self.pods_moved.clear()
        return self._apply(changed)

    @staticmethod
    def _unindex(
        index: dict[str, set[str]], key: str | None, name: str, nodes_by_key: Mapping[str, set[str]]
    ) -> set[str]:
        """Drop a claim from a provider-id index; the nodes with that provider id, whose join it was."""
        if key is None:
            return set()
        index[key].discard(name)
        return set(nodes_by_key.get(key, set()))

    def _apply(self, changed: Mapping[tuple[str, int], StateNode | None]) -> tuple[StateNode, ...]:
        came_or_went = False
        for key, entry in changed.items():
            if entry is None:
                if self._entries.pop(key, None) is not None:
                    came_or_went = True
            else:
                if key not in self._entries:
                    came_or_went = True
                self._entries[key] = entry
        if came_or_went:
            keys = sorted(self._entries)
            self._position = {key: i for i, key in enumerate(keys)}
            self._sorted = tuple(self._entries[key] for key in keys)
        elif changed:
            entries = list(self._sorted)
            for key, entry in changed.items():
                if entry is not None:
                    entries[self._position[key]] = entry
            self._sorted = tuple(entries)
        return self._sorted
