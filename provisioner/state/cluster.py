"""ClusterState: the in-memory picture of the cluster (nodes, claims, pods, pools, node classes,
daemonsets, PDBs), fed only by informers or the embedded cluster, and the frozen Snapshot that decision
code reads.

A StateNode joins a Node and its NodeClaim (either may be missing: a claim in flight has no Node yet; a
Node we do not own has no claim), with the pods bound to it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from provisioner.api import NodeClaim, NodePool, quantities
from provisioner.api import labels as wk
from provisioner.api.common import is_true
from provisioner.api.nodeclaim import INITIALIZED
from provisioner.api.nodeclass import AWSNodeClass, GCPNodeClass, NodeClass
from provisioner.api.quantities import ResourceList
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
            return quantities.parse_resource_list(self.claim.status.allocatable)
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
    daemonsets: tuple[DaemonSet, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    nodepools: tuple[NodePool, ...] = ()
    nodeclasses: Mapping[tuple[str, str], NodeClass] = field(default_factory=dict)
    """(kind, name) -> NodeClass."""
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Namespace -> its labels (the team label among them)."""

    def node(self, name: str) -> StateNode | None:
        return next((n for n in self.nodes if n.name == name), None)

    def bound_pods(self) -> Iterable[Pod]:
        for n in self.nodes:
            yield from n.pods


class ClusterState:
    """Thread-safe store of the cluster's objects, keyed by kind. Informers (or the embedded cluster)
    call `upsert` and `remove`; everyone else reads `snapshot()`."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.pods: dict[str, Pod] = {}
        self.nodes: dict[str, Node] = {}
        self.claims: dict[str, NodeClaim] = {}
        self.nodepools: dict[str, NodePool] = {}
        self.nodeclasses: dict[tuple[str, str], NodeClass] = {}
        self.daemonsets: dict[str, DaemonSet] = {}
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.generation = 0
        """Incremented on every change, so callers can tell whether anything moved."""

    def upsert(self, kind: str, obj: Mapping[str, Any]) -> None:
        """Add or replace one object given as Kubernetes JSON."""
        with self._lock:
            self.generation += 1
            meta = obj.get("metadata") or {}
            if kind == "Pod":
                pod = Pod.from_dict(obj)
                self.pods[pod.key] = pod
            elif kind == "Node":
                node = Node.from_dict(obj)
                self.nodes[node.name] = node
            elif kind == "NodeClaim":
                claim = NodeClaim.model_validate(obj)
                self.claims[claim.name] = claim
            elif kind == "NodePool":
                pool = NodePool.model_validate(obj)
                self.nodepools[pool.name] = pool
            elif kind in ("AWSNodeClass", "GCPNodeClass"):
                model = AWSNodeClass if kind == "AWSNodeClass" else GCPNodeClass
                nc = model.model_validate(obj)
                self.nodeclasses[(kind, nc.name)] = nc
            elif kind == "DaemonSet":
                ds = DaemonSet.from_dict(obj)
                self.daemonsets[f"{ds.namespace}/{ds.name}"] = ds
            elif kind == "PodDisruptionBudget":
                pdb = PodDisruptionBudget.from_dict(obj)
                self.pdbs[f"{pdb.namespace}/{pdb.name}"] = pdb
            elif kind == "Namespace":
                self.namespaces[meta["name"]] = dict(meta.get("labels") or {})
            else:
                raise ValueError(f"ClusterState does not track kind {kind!r}")

    def remove(self, kind: str, key: str) -> None:
        """Forget one object: `namespace/name` for namespaced kinds, `name` otherwise."""
        with self._lock:
            self.generation += 1
            store: dict[Any, Any] = {
                "Pod": self.pods,
                "Node": self.nodes,
                "NodeClaim": self.claims,
                "NodePool": self.nodepools,
                "DaemonSet": self.daemonsets,
                "PodDisruptionBudget": self.pdbs,
                "Namespace": self.namespaces,
            }.get(kind, {})
            if kind in ("AWSNodeClass", "GCPNodeClass"):
                self.nodeclasses.pop((kind, key), None)
            else:
                store.pop(key, None)

    def snapshot(self) -> Snapshot:
        """Join nodes with their claims (by provider id, then by node name) and pods with their nodes."""
        with self._lock:
            by_provider: dict[str, NodeClaim] = {}
            by_node_name: dict[str, NodeClaim] = {}
            for claim in self.claims.values():
                if claim.status.provider_id:
                    by_provider[claim.status.provider_id] = claim
                if claim.status.node_name:
                    by_node_name[claim.status.node_name] = claim
            pods_by_node: dict[str, list[Pod]] = {}
            pending: list[Pod] = []
            for pod in self.pods.values():
                if pod.is_terminal:
                    continue
                if pod.node_name:
                    pods_by_node.setdefault(pod.node_name, []).append(pod)
                else:
                    pending.append(pod)
            nodes: list[StateNode] = []
            joined: set[str] = set()
            for node in self.nodes.values():
                claim = by_provider.get(node.provider_id or "") or by_node_name.get(node.name)
                if claim is not None:
                    joined.add(claim.name)
                nodes.append(
                    StateNode(
                        name=node.name, node=node, claim=claim, pods=tuple(pods_by_node.get(node.name, ()))
                    )
                )
            for claim in self.claims.values():
                if claim.name not in joined:
                    nodes.append(StateNode(name=claim.name, claim=claim))
            nodes.sort(key=lambda n: n.name)
            return Snapshot(
                nodes=tuple(nodes),
                pending_pods=tuple(sorted(pending, key=lambda p: p.key)),
                daemonsets=tuple(self.daemonsets[k] for k in sorted(self.daemonsets)),
                pdbs=tuple(self.pdbs[k] for k in sorted(self.pdbs)),
                nodepools=tuple(self.nodepools[k] for k in sorted(self.nodepools)),
                nodeclasses=dict(self.nodeclasses),
                namespaces={k: dict(v) for k, v in self.namespaces.items()},
            )


def team_of(pod: Pod, namespaces: Mapping[str, Mapping[str, str]]) -> str | None:
    """The team that owns a pod: the namespace's `provisioner.sh/team` label."""
    return namespaces.get(pod.namespace, {}).get(wk.TEAM)
