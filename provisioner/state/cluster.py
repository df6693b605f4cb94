"""ClusterState: the in-memory picture of the cluster (nodes, claims, pods, pools, node classes,
daemonsets, PDBs), fed only by informers or the embedded cluster, and the frozen Snapshot that decision
code reads (`state.snapshot`, whose StateNode and Snapshot are re-exported here).
"""

from __future__ import annotations

import threading
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any, TypeVar, overload

from provisioner.api import KINDS, NodeClaim, NodePool, kinds
from provisioner.api.kinds import NODECLASS_KINDS
from provisioner.api.nodeclass import NodeClass
from provisioner.api.provisioning_request import ProvisioningRequest
from provisioner.api.team import Department, Team
from provisioner.state.objects import DaemonSet, Node, Pod, PodDisruptionBudget, spec_key
from provisioner.state.snapshot import Snapshot as Snapshot
from provisioner.state.snapshot import SnapshotNodes
from provisioner.state.snapshot import StateNode as StateNode

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


class StoreView(Mapping[K, V]):
    """A read-only window on one of ClusterState's stores, for readers in any thread.

    Each call holds the state's lock, and iteration (`keys`, `values`, `items`, `for key in view`) walks a
    copy taken under it, so the store never changes under a reader ("dictionary changed size during
    iteration"). Two calls are two moments: to read several objects as one moment (a claim and its Node),
    hold `ClusterState.lock` around the calls, or read a snapshot.
    """

    __slots__ = ("_data", "_lock")

    def __init__(self, data: dict[K, V], lock: threading.RLock) -> None:
        self._data = data
        self._lock = lock

    def __getitem__(self, key: K) -> V:
        with self._lock:
            return self._data[key]

    @overload
    def get(self, key: K, /) -> V | None: ...

    @overload
    def get(self, key: K, /, default: V | T) -> V | T: ...

    def get(self, key: K, /, default: object = None) -> object:
        # Mapping's own `get` goes through `__getitem__` and a KeyError on every miss: a dict lookup here.
        with self._lock:
            return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    def keys(self) -> KeysView[K]:
        with self._lock:
            return dict(self._data).keys()

    def values(self) -> ValuesView[V]:
        with self._lock:
            return dict(self._data).values()

    def items(self) -> ItemsView[K, V]:
        with self._lock:
            return dict(self._data).items()


class Changes:
    """The keys of one kind's objects written (upserted or removed) since the last `take`, as
    `ClusterState.changes` hands them out; filled under the state's lock."""

    __slots__ = ("_lock", "keys")

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self.keys: set[str] = set()

    def take(self) -> set[str]:
        """The keys written since the last take, and a fresh start."""
        with self._lock:
            keys, self.keys = self.keys, set()
            return keys


_TEMPLATES = 256
"""How many spec sets `ClusterState` remembers a parsed pod of (the oldest is forgotten first)."""


class ClusterState:
    """Thread-safe store of the cluster's objects, keyed by kind. Informers (or the embedded cluster)
    call `upsert` and `remove`, each under the lock; everyone else reads `snapshot()` (one consistent
    moment, shared until the next write) or the read-only views (`pods`, `nodes`, `claims`...), whose
    every call holds the lock."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._pods: dict[str, Pod] = {}
        self._nodes: dict[str, Node] = {}
        self._claims: dict[str, NodeClaim] = {}
        self._nodepools: dict[str, NodePool] = {}
        self._nodeclasses: dict[tuple[str, str], NodeClass] = {}
        self._daemonsets: dict[str, DaemonSet] = {}
        self._pdbs: dict[str, PodDisruptionBudget] = {}
        self._namespaces: dict[str, dict[str, str]] = {}
        self._teams: dict[str, Team] = {}
        self._departments: dict[str, Department] = {}
        self._provisioning_requests: dict[str, ProvisioningRequest] = {}
        self._pod_templates: dict[str, Mapping[str, Any]] = {}
        self.pods = StoreView(self._pods, self._lock)
        """`namespace/name` -> Pod."""
        self.nodes = StoreView(self._nodes, self._lock)
        self.claims = StoreView(self._claims, self._lock)
        self.nodepools = StoreView(self._nodepools, self._lock)
        self.nodeclasses = StoreView(self._nodeclasses, self._lock)
        """(kind, name) -> NodeClass."""
        self.daemonsets = StoreView(self._daemonsets, self._lock)
        """`namespace/name` -> DaemonSet."""
        self.pdbs = StoreView(self._pdbs, self._lock)
        """`namespace/name` -> PodDisruptionBudget."""
        self.namespaces = StoreView(self._namespaces, self._lock)
        """Namespace -> its labels."""
        self.teams = StoreView(self._teams, self._lock)
        self.departments = StoreView(self._departments, self._lock)
        self.provisioning_requests = StoreView(self._provisioning_requests, self._lock)
        """`namespace/name` -> ProvisioningRequest (autoscaling.x-k8s.io/v1)."""
        self.pod_templates = StoreView(self._pod_templates, self._lock)
        """`namespace/name` -> PodTemplate document (what a ProvisioningRequest's pod sets name)."""
        self.generation = 0
        """Incremented on every change, so callers can tell whether anything moved."""
        self._snapshot: tuple[int, Snapshot] | None = None
        # Kept as objects come and go, so a snapshot costs the changes since the last one, not every pod
        # and node: the non-terminal pods by node and unbound, each pod's place in `_pods` (a node's pods
        # are listed in that order), the snapshot's nodes (`SnapshotNodes`, told what was written), and
        # the kinds whose part of the snapshot must be made again.
        self._bound: dict[str, dict[str, Pod]] = {}
        self._pending: dict[str, Pod] = {}
        self._unplaced: set[str] = set()
        """Node names with pods bound and no Node held (`Snapshot.unplaced_pods`)."""
        self.pending = StoreView(self._pending, self._lock)
        """`namespace/name` -> the pods not bound to a node and not terminal."""
        self._order: dict[str, int] = {}
        self._inserted = 0
        self._joined = SnapshotNodes()
        self._stale: set[str] = set(_snapshot_parts())
        # The first version of each pod made from recent sets of spec objects (`objects.spec_key`): a new
        # pod made from the template its siblings were made from takes their spec's parse.
        # Each entry holds its pod, so the objects its key names stay alive (and their ids theirs).
        self._templates: dict[tuple[tuple[str, int], ...], Pod] = {}
        self._feeds: dict[str, list[Changes]] = {}

    @property
    def lock(self) -> threading.RLock:
        """Held by every write and every view call. Hold it to read several objects as one moment, or to
        make several writes appear to readers at once; never across I/O (informer threads wait on it)."""
        return self._lock

    def upsert(self, kind: str, obj: Mapping[str, Any]) -> None:
        """Add or replace one object given as Kubernetes JSON. A malformed object (wrong types, missing
        keys, bad quantities) raises ValueError naming its kind and name, and changes nothing: whoever
        feeds the state skips it and keeps the others.

        The document is kept (as `raw`) and must not be changed in place afterwards, nor what it shares
        with documents given before: a pod's new version takes the parse of the parts it shares with
        the last one (see `Pod.from_dict`), as merge patches share what they leave unchanged."""
        try:
            self._upsert(kind, obj)
        except ValueError:
            raise
        except (KeyError, TypeError, AttributeError, IndexError) as err:
            meta = obj.get("metadata") if isinstance(obj, Mapping) else None
            name = meta.get("name") if isinstance(meta, Mapping) else None
            what = f"missing field {err}" if isinstance(err, KeyError) else f"{type(err).__name__}: {err}"
            raise ValueError(f"malformed {kind} {name!r}: {what}") from err

    def _upsert(self, kind: str, obj: Mapping[str, Any]) -> None:
        with self._lock:
            self.generation += 1
            meta = obj.get("metadata") or {}
            if kind not in kinds.BY_KIND:
                raise ValueError(f"ClusterState does not track kind {kind!r}")
            key: str
            if kind == "Pod":
                pod = self._parse_pod(obj, meta)
                key = pod.key
                self._unindex(key)
                self._pods[key] = pod
                self._index(pod)
            elif kind in NODECLASS_KINDS:
                nc = KINDS[kind].model_validate(obj)
                assert isinstance(nc, NodeClass)
                key = nc.name
                self._nodeclasses[(kind, key)] = nc
            else:
                key, value = _parse(kind, obj, meta)
                self._store(kind)[key] = value
            self._changed(kind, key)

    def _parse_pod(self, obj: Mapping[str, Any], meta: Any) -> Pod:
        """The pod, sharing the parse of its last version, or of the first version of a pod made from
        the same spec objects (a sibling of its template), where they hold the same objects."""
        last = self._last_version(meta)
        if last is not None:
            return Pod.from_dict(obj, like=(last,))
        key = spec_key(obj.get("spec"))
        same = self._templates.get(key) if key is not None else None
        pod = Pod.from_dict(obj, like=() if same is None else (same,))
        if key is not None:
            if len(self._templates) >= _TEMPLATES and key not in self._templates:
                del self._templates[next(iter(self._templates))]
            self._templates[key] = pod
        return pod

    def changes(self, kind: str) -> Changes:
        """A new feed of the keys of `kind` (as `remove` takes them) upserted or removed from now on:
        for a reader that works in proportion to what changed instead of walking a store."""
        with self._lock:
            feed = Changes(self._lock)
            self._feeds.setdefault(kind, []).append(feed)
            return feed

    def _changed(self, kind: str, key: str) -> None:
        if kind == "Node":
            self._joined.nodes_written.add(key)
            if key in self._bound:
                # A Node came for pods already bound to it, or went with pods still on it.
                if key in self._nodes:
                    self._unplaced.discard(key)
                else:
                    self._unplaced.add(key)
                self._stale.add("unplaced")
        elif kind == "NodeClaim":
            self._joined.claims_written.add(key)
        elif kind != "Pod":
            self._stale.add(kind)
        for feed in self._feeds.get(kind, ()):
            feed.keys.add(key)

    def put_claim(self, claim: NodeClaim) -> None:
        """Keep a NodeClaim model as it is: the embedded cluster's patch of a stored claim, whose fields it
        validated (`clusterapi.in_memory.merged`). Claims from anywhere else come through `upsert`."""
        with self._lock:
            self.generation += 1
            self._claims[claim.name] = claim
            self._changed("NodeClaim", claim.name)

    def _last_version(self, meta: Any) -> Pod | None:
        """The pod held under a document's name: the last version, whose parse the new one may share."""
        if type(meta) is not dict or type(meta.get("name")) is not str:
            return None
        return self._pods.get(f"{meta.get('namespace') or 'default'}/{meta['name']}")

    def remove(self, kind: str, key: str) -> None:
        """Forget one object: `namespace/name` for namespaced kinds, `name` otherwise."""
        with self._lock:
            self.generation += 1
            if kind in NODECLASS_KINDS:
                self._nodeclasses.pop((kind, key), None)
            else:
                if kind == "Pod":
                    self._unindex(key)
                    self._order.pop(key, None)
                self._store(kind).pop(key, None)
            self._changed(kind, key)

    def _index(self, pod: Pod) -> None:
        if pod.key not in self._order:
            self._order[pod.key] = self._inserted
            self._inserted += 1
        if pod.is_terminal:
            return
        if pod.node_name:
            self._bound.setdefault(pod.node_name, {})[pod.key] = pod
            self._joined.pods_moved.add(pod.node_name)
            if pod.node_name not in self._nodes:
                self._unplaced.add(pod.node_name)
                self._stale.add("unplaced")
        else:
            self._pending[pod.key] = pod
            self._stale.add("pending")

    def _unindex(self, key: str) -> None:
        old = self._pods.get(key)
        if old is None:
            return
        if self._pending.pop(key, None) is not None:
            self._stale.add("pending")
        if old.node_name and old.node_name in self._bound:
            on_node = self._bound[old.node_name]
            on_node.pop(key, None)
            if not on_node:
                del self._bound[old.node_name]
                self._unplaced.discard(old.node_name)
            if old.node_name not in self._nodes:
                self._stale.add("unplaced")
            self._joined.pods_moved.add(old.node_name)

    def pods_on(self, node_name: str) -> list[Pod]:
        """The pods bound to a node (by name, whether or not its Node is held) and not terminal."""
        with self._lock:
            return list(self._bound.get(node_name, {}).values())

    def keys_of(self, kind: str) -> set[str]:
        """The keys held for a kind (`namespace/name` for namespaced kinds, `name` otherwise): what a
        relist compares with."""
        with self._lock:
            if kind in NODECLASS_KINDS:
                return {name for (k, name) in self._nodeclasses if k == kind}
            return set(self._store(kind))

    def _store(self, kind: str) -> dict[str, Any]:
        stores: dict[str, dict[str, Any]] = {
            "Pod": self._pods,
            "Node": self._nodes,
            "NodeClaim": self._claims,
            "NodePool": self._nodepools,
            "DaemonSet": self._daemonsets,
            "PodDisruptionBudget": self._pdbs,
            "Namespace": self._namespaces,
            "Team": self._teams,
            "Department": self._departments,
            "ProvisioningRequest": self._provisioning_requests,
            "PodTemplate": self._pod_templates,
        }
        return stores.get(kind, {})

    def snapshot(self) -> Snapshot:
        """The cluster at one moment: nodes joined with their claims (by provider id, then by node name)
        and pods with their nodes. Built under the lock from the last one and what changed since, and
        shared by every reader until the next write (a controller step asks for several)."""
        with self._lock:
            if self._snapshot is not None and self._snapshot[0] == self.generation:
                return self._snapshot[1]
            last = self._snapshot[1] if self._snapshot is not None else Snapshot()
            stale = self._stale
            snap = Snapshot(
                nodes=self._joined.build(self._nodes, self._claims, self._bound, self._order),
                pending_pods=(
                    # By key, the keys sorted as strings (no call per pod: this runs at every pass
                    # while pods arrive).
                    tuple(map(self._pending.__getitem__, sorted(self._pending)))
                    if "pending" in stale
                    else last.pending_pods
                ),
                unplaced_pods=(
                    tuple(sorted((p for n in self._unplaced for p in self._bound[n].values()), key=_key))
                    if "unplaced" in stale
                    else last.unplaced_pods
                ),
                daemonsets=_sorted(self._daemonsets) if "DaemonSet" in stale else last.daemonsets,
                pdbs=_sorted(self._pdbs) if "PodDisruptionBudget" in stale else last.pdbs,
                nodepools=_sorted(self._nodepools) if "NodePool" in stale else last.nodepools,
                nodeclasses=(dict(self._nodeclasses) if stale & set(NODECLASS_KINDS) else last.nodeclasses),
                namespaces=(
                    {k: dict(v) for k, v in self._namespaces.items()}
                    if "Namespace" in stale
                    else last.namespaces
                ),
                teams=_sorted(self._teams) if "Team" in stale else last.teams,
                departments=_sorted(self._departments) if "Department" in stale else last.departments,
            )
            stale.clear()
            self._snapshot = (self.generation, snap)
            return snap


def snapshot_kinds() -> tuple[str, ...]:
    """The tracked kinds (`provisioner.api.kinds.tracked()`) a Snapshot is made of, the installed
    plug-ins' NodeClass kinds included; the others (PodTemplates, ProvisioningRequests) only their
    controller reads."""
    return (
        "Pod",
        "Node",
        "NodeClaim",
        "DaemonSet",
        "PodDisruptionBudget",
        "NodePool",
        *NODECLASS_KINDS,
        "Namespace",
        "Team",
        "Department",
    )


def _snapshot_parts() -> tuple[str, ...]:
    """The snapshot's parts besides its nodes, each made again only when its kind changed ("pending": the
    pending pods; "unplaced": the pods bound to a Node not held)."""
    return ("pending", "unplaced", *snapshot_kinds()[3:])


def _parse(kind: str, obj: Mapping[str, Any], meta: Mapping[str, Any]) -> tuple[str, Any]:
    """(key, what the store holds) for a kind kept in a store of its own (not a Pod or a NodeClass): our
    kinds through their models, the others through `state.objects`; namespaced kinds keyed
    `namespace/name` (the table's `namespaced`), the others by name."""
    model = KINDS.get(kind)
    if model is not None:
        parsed = model.model_validate(obj)
        return parsed.name, parsed
    if kind == "Node":
        node = Node.from_dict(obj)
        return node.name, node
    if kind == "DaemonSet":
        ds = DaemonSet.from_dict(obj)
        return f"{ds.namespace}/{ds.name}", ds
    if kind == "PodDisruptionBudget":
        pdb = PodDisruptionBudget.from_dict(obj)
        return f"{pdb.namespace}/{pdb.name}", pdb
    if kind == "Namespace":
        return meta["name"], dict(meta.get("labels") or {})
    if kind == "ProvisioningRequest":
        request = ProvisioningRequest.model_validate(obj)
        return request.key, request
    assert kind == "PodTemplate", kind
    key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
    if not isinstance(obj.get("template"), Mapping):
        raise ValueError(f"PodTemplate {key}: template is missing")
    return key, obj


def _key(pod: Pod) -> str:
    return pod.key


def _sorted(store: Mapping[str, V]) -> tuple[V, ...]:
    return tuple(store[k] for k in sorted(store))


def team_of(pod: Pod, teams: Mapping[str, str]) -> str | None:
    """The team that owns a pod; `teams`: namespace -> team, `Snapshot.team_names()` (one rule for quota,
    the ledger and the disruption records: `provisioner.api.team.namespace_teams`)."""
    return teams.get(pod.namespace)
