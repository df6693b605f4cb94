"""What a real cluster does around the provisioner, for `provisioner simulate` with time: the embedded API
server (a MemoryCluster), kubelets that register a Node for each
launched instance, the GPU operator that lifts start-up taints, kube-scheduler binding pending pods where
they fit, and the workload controllers that recreate evicted pods.

None of it decides anything the provisioner decides; it only makes the world answer as a cluster would,
deterministically: the same scenario gives the same names, bindings and order every run.

About 560 lines: one small stand-in per cluster component, each a class or two functions; the one that
grows past that moves to its own module, as the pool-scoped catalog wrapper did (`sim.pool_types`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sortedcontainers import SortedList

from providers.fake.kwok import node_for_instance, node_name_for
from provisioner.api import NodeClaim, durations, quantities
from provisioner.api import labels as wk
from provisioner.api.common import is_true
from provisioner.api.nodeclaim import DISRUPTING
from provisioner.api.nodepool import DisruptionReason
from provisioner.clock import isoformat
from provisioner.cloudprovider import Instance, InstanceType
from provisioner.clusterapi import MemoryCluster, NotFoundError, merge_patch
from provisioner.sim.scenario import RUNS_FOR
from provisioner.state.objects import Node, Pod, tolerates_all

VOLUNTARY = frozenset(r.value for r in DisruptionReason)
"""The reasons the disruption controller writes (Underutilized, Empty, Drifted, Expired, ...)."""


class SimCluster(MemoryCluster):
    """The embedded API server: a MemoryCluster, plus the writes the stand-ins below make."""

    pool_status_writes = 0
    """NodePool status writes so far: bookkeeping, not a change the run has to wait on."""

    def __init__(self, state: Any, clock: Any) -> None:
        super().__init__(state, clock)
        self.max_disrupting: dict[str, int] = {}
        """Pool -> the most of its nodes under a voluntary disruption at once (marked Disrupting, or
        deleted with a voluntary reason), checked at every NodeClaim write so none is missed."""
        self._disrupting: dict[str, str] = {}
        """Claim -> pool, for the claims under a voluntary disruption now: kept at each write of the
        claim (every claim write and removal goes through `_store_claim`), so a write costs one claim, not
        the fleet."""
        self._busy: dict[str, int] = {}
        """Pool -> how many of `_disrupting` are its."""
        self._stamp: tuple[datetime, str] | None = None

    def _store_claim(self, claim: NodeClaim) -> None:
        super()._store_claim(claim)
        name = claim.name
        stored = self.state.claims.get(name)
        before = self._disrupting.pop(name, None)
        if before is not None:
            self._busy[before] -= 1
        # Only the disruption controller's reasons: a failed launch or an interruption is not a decision
        # the budgets bound.
        if (
            stored is not None
            and stored.metadata.annotations.get(wk.DISRUPTION_REASON) in VOLUNTARY
            and (
                stored.metadata.deletion_timestamp is not None
                or is_true(stored.status.conditions, DISRUPTING)
            )
        ):
            pool = self._disrupting[name] = stored.nodepool or ""
            # Only this pool's count can have grown.
            count = self._busy[pool] = self._busy.get(pool, 0) + 1
            self.max_disrupting[pool] = max(self.max_disrupting.get(pool, 0), count)

    def patch_nodepool_status(self, name: str, status: Mapping[str, Any]) -> None:
        super().patch_nodepool_status(name, status)
        self.pool_status_writes += 1

    def patch_quota_status(self, kind: str, name: str, status: Mapping[str, Any]) -> None:
        super().patch_quota_status(kind, name, status)
        self.pool_status_writes += 1

    # Helpers for the stand-ins below (not part of ClusterAPI).

    def stamp(self) -> str:
        """The clock's now as Kubernetes writes it: one string per moment, which every document written in
        that moment shares."""
        now = self.clock.now()
        if self._stamp is None or self._stamp[0] != now:
            self._stamp = (now, isoformat(now))
        return self._stamp[1]

    def create(self, kind: str, doc: Mapping[str, Any]) -> None:
        # A new top level and metadata; the rest is shared with `doc`, as objects' documents are only read
        # (see MemoryCluster).
        meta = {"creationTimestamp": self.stamp(), **(doc.get("metadata") or {})}
        body: Mapping[str, Any] = {**doc, "metadata": meta}
        if kind == "Pod":
            body = gated(body, self.state)
        self.state.upsert(kind, body)

    def write_pod(self, pod: Pod, patch: Mapping[str, Any]) -> None:
        """Merge-patch spec and status at once, as kube-scheduler's binding and the kubelet do."""
        current = self.state.pods.get(pod.key)
        if current is None:
            raise NotFoundError(f"Pod {pod.key} not found")
        self.state.upsert("Pod", merge_patch(current.raw, patch))


def gated(doc: Mapping[str, Any], state: Any) -> Mapping[str, Any]:
    """The admission webhook's part: a new pod of a team's namespace gets the admission gate (in a copy of
    the document)."""
    from provisioner.quota.book import QuotaBook
    from provisioner.quota.gate import gate_patch

    if not state.teams:
        return doc
    meta = doc.get("metadata") or {}
    book = QuotaBook(teams=state.teams.values(), departments=(), nodepools=(), namespaces=state.namespaces)
    if gate_patch(doc, book.team_of(meta.get("namespace") or "default")) is None:
        return doc
    return merge_patch(doc, {"spec": {"schedulingGates": [*_gates(doc), {"name": wk.ADMISSION_GATE}]}})


def _gates(doc: Mapping[str, Any]) -> list[Any]:
    return list((doc.get("spec") or {}).get("schedulingGates") or ())


@dataclasses.dataclass
class Kubelets:
    """A Node for each launched instance once it has booted; the Node goes when its instance does. The
    GPU operator's part too: start-up taints are lifted once the Node is registered."""

    cluster: SimCluster
    types: Mapping[str, InstanceType]
    boot: timedelta = timedelta(seconds=30)
    """From launch to the Node appearing."""
    launched: dict[str, Instance] = dataclasses.field(default_factory=dict)
    deleted: list[Instance] = dataclasses.field(default_factory=list)
    registered: set[str] = dataclasses.field(default_factory=set)

    def __post_init__(self) -> None:
        # The GPU operator looks at the Nodes (and the claims naming them) written since it last looked:
        # a Node and claim unchanged since then were decided on then.
        self._nodes = self.cluster.state.changes("Node")
        self._claims = self.cluster.state.changes("NodeClaim")
        self._claim_of: dict[str, str] = {}
        """Node name -> the claim whose status names it."""
        self._node_of: dict[str, str] = {}
        """Claim -> the node name its status gives."""
        self._looked = False

    def on_launch(self, instance: Instance, instance_type: InstanceType) -> None:
        self.launched[instance.provider_id] = instance

    def on_delete(self, instance: Instance) -> None:
        self.launched.pop(instance.provider_id, None)
        self.deleted.append(instance)

    def sync(self, now: datetime) -> None:
        state = self.cluster.state
        for pid in sorted(self.launched.keys() - self.registered):
            inst = self.launched[pid]
            if inst.launched_at is not None and now - inst.launched_at < self.boot:
                continue
            manifest = node_for_instance(inst, self.types.get(inst.instance_type), now=now)
            self.cluster.create("Node", manifest)
            self.registered.add(pid)
        for inst in self.deleted:
            name = node_name_for(inst)
            if name in state.nodes:
                self.cluster.delete_node(name)
            self.registered.discard(inst.provider_id)
        self.deleted.clear()
        # The GPU operator: once the provisioner registered the Node, its drivers are ready.
        look = self._nodes.take()
        claims = self._claims.take()
        if not self._looked:  # the first look takes in what was there before the feeds
            self._looked = True
            look |= state.nodes.keys()
            claims |= state.claims.keys()
        for claim_name in sorted(claims):
            before = self._node_of.pop(claim_name, None)
            if before is not None and self._claim_of.get(before) == claim_name:
                del self._claim_of[before]
                look.add(before)
            written = state.claims.get(claim_name)
            if written is not None and written.status.node_name:
                self._node_of[claim_name] = written.status.node_name
                self._claim_of[written.status.node_name] = claim_name
                look.add(written.status.node_name)
        for name in sorted(look):
            node = state.nodes.get(name)
            claim = state.claims.get(self._claim_of.get(name, ""))
            if node is None or claim is None or node.labels.get(wk.REGISTERED) != "true":
                continue
            startup = {t.key for t in claim.spec.startup_taints}
            if startup and any(t.key in startup for t in node.taints):
                kept = [t.to_dict() for t in node.taints if t.key not in startup]
                self.cluster.patch_node(name, {"spec": {"taints": kept}})


def fits(pod: Pod, node: Node, used: Mapping[str, int]) -> bool:
    """Whether kube-scheduler would bind the pod to the node: Ready and schedulable, taints tolerated,
    node selector, required node affinity and pool list met, requests within what is left."""
    return allows(pod, node) and quantities.fits(pod.requests, quantities.subtract(node.allocatable, used))


def allows(pod: Pod, node: Node) -> bool:
    """`fits` without the room: what the binder can check once per kind of pod and node."""
    if not node.ready or node.unschedulable or node.deleting:
        return False
    hard = [t for t in node.taints if t.effect in ("NoSchedule", "NoExecute")]
    if tolerates_all(pod.tolerations, hard) is not None:
        return False
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.required_node_terms and not any(
        all(r.matches(node.labels) for r in term) for term in pod.required_node_terms
    ):
        return False
    # A pod's pool list (`provisioner.sh/nodepools`) binds it to those pools' nodes, as the scheduler and
    # the disruption planner assume.
    return not (pod.nodepools and node.labels.get(wk.NODEPOOL) not in pod.nodepools)


def _term_namespaces(pod: Pod, namespaces: tuple[str, ...]) -> set[str]:
    return set(namespaces) or {pod.namespace}


def _matching(pod: Pod, term: Any, others: Sequence[tuple[Pod, Node]]) -> list[tuple[Pod, Node]]:
    """The bound pods a pod (anti-)affinity term of `pod` selects (its namespaces, its selector)."""
    spaces = _term_namespaces(pod, term.namespaces)
    selector = term.label_selector
    return [
        (p, n)
        for p, n in others
        if p.key != pod.key and p.namespace in spaces and selector is not None and selector.matches(p.labels)
    ]


def topology_ok(pod: Pod, node: Node, placed: Sequence[tuple[Pod, Node]], eligible: Sequence[Node]) -> bool:
    """Required pod affinity and anti-affinity, and DoNotSchedule topology spread, as kube-scheduler
    checks them for the incoming pod (`placed`: every bound pod with its node; `eligible`: the nodes the
    pod's node selector and affinity allow, for spread domains). The symmetric check (an existing pod's
    anti-affinity against the incoming one) is left out."""
    for term in pod.anti_affinity_required:
        domain = node.labels.get(term.topology_key)
        if domain is not None and any(
            n.labels.get(term.topology_key) == domain for _, n in _matching(pod, term, placed)
        ):
            return False
    for term in pod.affinity_required:
        matches = _matching(pod, term, placed)
        domain = node.labels.get(term.topology_key)
        if not matches:
            # The first pod of a group that selects itself may go anywhere (kube-scheduler's rule).
            if term.label_selector is not None and term.label_selector.matches(pod.labels):
                continue
            return False
        if domain is None or not any(n.labels.get(term.topology_key) == domain for _, n in matches):
            return False
    for spread in pod.topology_spread:
        if spread.when_unsatisfiable != "DoNotSchedule" or spread.label_selector is None:
            continue
        key = spread.topology_key
        domain = node.labels.get(key)
        if domain is None:
            return False
        counts = {n.labels[key]: 0 for n in eligible if key in n.labels}
        for p, n in placed:
            value = n.labels.get(key)
            if value in counts and p.namespace == pod.namespace and spread.label_selector.matches(p.labels):
                counts[value] += 1
        if counts.get(domain, 0) + 1 - min(counts.values(), default=0) > spread.max_skew:
            return False
    return True


def _node_allows(pod: Pod, node: Node) -> bool:
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    return not pod.required_node_terms or any(
        all(r.matches(node.labels) for r in term) for term in pod.required_node_terms
    )


def _room_key(node_name: str, allocatable: Mapping[str, int], used: Mapping[str, int]) -> tuple[int, str]:
    """MostAllocated scoring: the node with the least room left (GPUs first, then CPU) wins; ties by name."""
    gpus = allocatable.get(wk.GPU_RESOURCE, 0) - used.get(wk.GPU_RESOURCE, 0)
    cpu = allocatable.get(quantities.CPU, 0) - used.get(quantities.CPU, 0)
    return (gpus * 10**9 + cpu, node_name)


def _placement_class(pod: Pod) -> tuple[Any, ...]:
    """What decides which nodes a pod may go to apart from room: pods alike here are alike to the binder."""
    return (pod.tolerations, tuple(sorted(pod.node_selector.items())), pod.required_node_terms, pod.nodepools)


_SCHEDULED = {"type": "PodScheduled", "status": "True"}
"""The condition a bound pod carries (one object, in every bound pod's document)."""


@dataclasses.dataclass
class Binder:
    """kube-scheduler, simply: each pending pod (in name order) goes to the fitting node with the least
    room left (kube-scheduler's MostAllocated scoring, which keeps nodes packed and the rest emptying),
    within its required pod (anti-)affinity and DoNotSchedule spread; a pod that fits nowhere is marked
    PodScheduled=False/Unschedulable, which is what the provisioner watches for.

    The work is in proportion to the pending pods, not pods x nodes: schedulable nodes are kept ordered by
    room left, so a pod without pod (anti-)affinity or spread takes the first node from the least room
    that could hold its requests and passes its checks (which nodes pass them is computed once per kind
    of pod: tolerations, selector, affinity, pool list); and a kind of pod with given requests that fitted
    nowhere is not tried again in the same pass (room only shrinks within a pass). Pods with pod
    (anti-)affinity or spread are checked against every node, as before."""

    cluster: SimCluster

    def sync(self) -> int:
        state = self.cluster.state
        # The snapshot (kept up as pods change) has the pending pods in name order and what each node's
        # pods request: no walk of every pod per tick.
        snap = state.snapshot()
        # A gated pod is not kube-scheduler's yet: neither bound nor marked Unschedulable.
        pending = [p for p in snap.pending_pods if not p.deleting and not p.scheduling_gates]
        if not pending:
            return 0
        used = {sn.name: dict(sn.requested) for sn in snap.nodes if sn.node is not None}
        nodes = [sn.node for sn in snap.nodes if sn.node is not None]
        by_room = SortedList(
            _room_key(n.name, n.allocatable, used.get(n.name, {}))
            for n in nodes
            if n.ready and not n.unschedulable and not n.deleting
        )
        placed: list[tuple[Pod, Node]] | None = None
        # What every pod bound (or refused) in this pass is written: one object each, shared by all.
        started = self.cluster.stamp()
        refused = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": f"0/{len(nodes)} nodes are available",
        }
        allowed: dict[tuple[Any, ...], dict[str, bool]] = {}
        classes: dict[tuple[int, ...], tuple[Any, ...]] = {}
        fitted_nowhere: set[tuple[Any, ...]] = set()
        bound = 0
        for pod in pending:
            # Host ports depend on the pods already on a node, as topology does: checked node by node.
            topology = bool(
                pod.anti_affinity_required or pod.affinity_required or pod.topology_spread or pod.host_ports
            )
            target: str | None = None
            if topology:
                if placed is None:
                    placed = [
                        (p, state.nodes[p.node_name])
                        for p in state.pods.values()
                        if p.node_name and not p.is_terminal and p.node_name in state.nodes
                    ]
                target = self._with_topology(pod, nodes, used, placed)
            else:
                # Pods of one template share these objects (`Pod.from_dict`), so their class is worked
                # out once a pass; the ids stay unique while `pending` holds the pods.
                shape = (
                    id(pod.tolerations),
                    id(pod.node_selector),
                    id(pod.required_node_terms),
                    id(pod.nodepools),
                    id(pod.requests),
                )
                known = classes.get(shape)
                if known is None:
                    known = classes[shape] = (_placement_class(pod), tuple(sorted(pod.requests.items())))
                kind = known[0]
                tried = known
                if tried not in fitted_nowhere:
                    target = self._least_room(pod, by_room, used, allowed.setdefault(kind, {}))
                    if target is None:
                        fitted_nowhere.add(tried)
            if target is not None:
                self.cluster.write_pod(
                    pod,
                    {
                        "spec": {"nodeName": target},
                        "status": {
                            "phase": "Running",
                            "startTime": started,
                            "conditions": pod.conditions_with(_SCHEDULED),
                        },
                    },
                )
                node = state.nodes[target]
                room = used.setdefault(target, {})
                before = _room_key(target, node.allocatable, room)
                for name, amount in pod.requests.items():
                    room[name] = room.get(name, 0) + amount
                if before in by_room:
                    by_room.remove(before)
                    by_room.add(_room_key(target, node.allocatable, room))
                if placed is not None:
                    placed.append((pod, node))
                bound += 1
            elif not pod.unschedulable:
                self.cluster.write_pod(
                    pod,
                    {"status": {"conditions": pod.conditions_with(refused)}},
                )
        return bound

    def _least_room(
        self,
        pod: Pod,
        by_room: SortedList,
        used: Mapping[str, Mapping[str, int]],
        allowed: dict[str, bool],
    ) -> str | None:
        """The fitting node with the least room left: every node that can hold the pod's GPUs and CPU
        scores at least (its GPUs, its CPU), so the walk starts there."""
        nodes = self.cluster.state.nodes
        floor = (pod.requests.get(wk.GPU_RESOURCE, 0) * 10**9 + pod.requests.get(quantities.CPU, 0), "")
        for _score, name in by_room.islice(by_room.bisect_left(floor)):
            node = nodes[name]
            ok = allowed.get(name)
            if ok is None:
                ok = allowed[name] = allows(pod, node)
            if ok and quantities.fits(
                pod.requests, quantities.subtract(node.allocatable, used.get(name, {}))
            ):
                return name
        return None

    @staticmethod
    def _with_topology(
        pod: Pod,
        nodes: Sequence[Node],
        used: Mapping[str, Mapping[str, int]],
        placed: Sequence[tuple[Pod, Node]],
    ) -> str | None:
        eligible = [n for n in nodes if _node_allows(pod, n)]
        best: tuple[int, str] | None = None
        for node in nodes:
            room = used.get(node.name, {})
            if not fits(pod, node, room) or not topology_ok(pod, node, placed, eligible):
                continue
            if pod.host_ports and any(
                n.name == node.name and any(w.conflicts(h) for w in pod.host_ports for h in p.host_ports)
                for p, n in placed
            ):
                continue
            key = _room_key(node.name, node.allocatable, room)
            if best is None or key < best:
                best = key
        return best[1] if best is not None else None


@dataclasses.dataclass
class Workloads:
    """The controllers that own pods (ReplicaSet, StatefulSet, Job): a pod of theirs that was evicted is
    created again, pending, under the same name. Bare Pods are not (as in Kubernetes). A pod annotated
    `sim.provisioner.sh/runs-for` finishes that long after it starts running, and is not created again."""

    cluster: SimCluster
    desired: dict[str, Pod] = dataclasses.field(default_factory=dict)
    """Pod key -> the pod as first added, whose manifest is created again when it disappears (the pods are
    the scenario's own: keeping them, not a manifest each, costs nothing)."""
    recreated: int = 0
    started: dict[str, datetime] = dataclasses.field(default_factory=dict)
    """Pod key -> when it was first seen running (pods with a run time)."""
    completed: list[str] = dataclasses.field(default_factory=list)
    """Pods that finished their run time, in order."""
    timed: set[str] = dataclasses.field(default_factory=set)
    """The keys of the pods with a run time (the only ones `sync` has to look at for it)."""

    def __post_init__(self) -> None:
        self._written = self.cluster.state.changes("Pod")

    @staticmethod
    def _manifest(pod: Pod) -> dict[str, Any]:
        # The pod's document without its node, status and creation time; the rest is shared with it (its
        # spec too when it names no node: the pods of one template share one spec).
        doc = {"apiVersion": "v1", **pod.raw, "kind": "Pod"}
        doc.pop("status", None)
        spec = doc.get("spec") or {}
        doc["spec"] = {k: v for k, v in spec.items() if k != "nodeName"} if "nodeName" in spec else spec
        doc["metadata"] = {k: v for k, v in (doc.get("metadata") or {}).items() if k != "creationTimestamp"}
        return doc

    def add(self, pods: Sequence[Pod]) -> None:
        """Create the pods now; those with an owner are kept alive from here on."""
        for pod in pods:
            doc = self._manifest(pod)
            # The loader names expanded pods (and daemon pods per node) itself; the raw template does not.
            doc.setdefault("metadata", {}).update(name=pod.name, namespace=pod.namespace)
            if pod.node_name:
                doc["spec"] = {**doc["spec"], "nodeName": pod.node_name}
                doc["status"] = {"phase": "Running", "startTime": self.cluster.stamp()}
            self.cluster.create("Pod", doc)
            if RUNS_FOR in pod.annotations:
                self.timed.add(pod.key)
            if pod.owner_kind is not None and not pod.is_daemonset_pod:
                self.desired[pod.key] = pod

    def remove(self, keys: Sequence[str]) -> None:
        """Delete pods for good (their workload was deleted)."""
        for key in keys:
            self.desired.pop(key, None)
            self.timed.discard(key)
            namespace, _, name = key.partition("/")
            if key in self.cluster.state.pods:
                self.cluster.delete_pod(namespace, name)

    def sync(self, now: datetime) -> None:
        # The missing pods, among those written (removed) since the last sync: a desired pod is created
        # at once, so one missing now was removed since.
        pods = self.cluster.state.pods
        for key in sorted(k for k in self._written.take() if k in self.desired and k not in pods):
            self.cluster.create("Pod", self._manifest(self.desired[key]))
            self.recreated += 1
            self.started.pop(key, None)
        # Pods that run for a set time: done once they have run that long (a pod started again after an
        # eviction starts its work over).
        for key in sorted(self.timed):
            pod = self.cluster.state.pods.get(key)
            text = pod.annotations.get(RUNS_FOR) if pod is not None else None
            if pod is None or text is None:
                continue
            if not pod.node_name or pod.is_terminal:
                self.started.pop(key, None)
                continue
            since = self.started.setdefault(key, now)
            length = durations.parse_duration(text, allow_never=False)
            if length is not None and now - since >= length:
                self.started.pop(key, None)
                self.completed.append(key)
                self.remove([key])

    def next_completion(self) -> datetime | None:
        """When the next running pod with a run time finishes (the clock must not jump past it)."""
        times = []
        for key, since in self.started.items():
            pod = self.cluster.state.pods.get(key)
            text = pod.annotations.get(RUNS_FOR) if pod is not None else None
            length = durations.parse_duration(text, allow_never=False) if text else None
            if length is not None:
                times.append(since + length)
        return min(times, default=None)


@dataclasses.dataclass
class DaemonSets:
    """The DaemonSet controller: one pod of each DaemonSet on every Node it may run on (taints tolerated,
    node selector and required affinity met), named `DS-NODE`, created bound; gone with its Node.

    Each sync looks at what was written since the last: the Nodes written, and the nodes whose daemon pod
    was removed (every node when a DaemonSet changed); and deletes the daemon pods of the Nodes removed
    (or written onto a missing Node). A node unchanged since was decided on then."""

    cluster: SimCluster

    def __post_init__(self) -> None:
        state = self.cluster.state
        self._nodes = state.changes("Node")
        self._pods = state.changes("Pod")
        self._sets = state.changes("DaemonSet")
        self._looked = False
        self._node_of: dict[str, str] = {}
        """Daemon pod key -> the node it is bound to."""
        self._on_node: dict[str, set[str]] = {}
        """Node name -> the daemon pods bound to it."""

    def sync(self) -> None:
        state = self.cluster.state
        nodes_written, pods_written = self._nodes.take(), self._pods.take()
        first = not self._looked
        self._looked = True
        if self._sets.take() or first:
            look = set(state.nodes.keys())
        else:
            look = set(nodes_written)
            starts = [f"{ds.namespace}/{ds.name}-" for ds in state.daemonsets.values()]
            for key in pods_written:
                if key not in state.pods:
                    look.update(key[len(start) :] for start in starts if key.startswith(start))
        for name in sorted(look):
            node = state.nodes.get(name)
            if node is None or node.deleting:
                continue
            hard = [t for t in node.taints if t.effect in ("NoSchedule", "NoExecute")]
            for key in sorted(state.daemonsets):
                ds = state.daemonsets[key]
                pod_name = f"{ds.name}-{name}"
                if f"{ds.namespace}/{pod_name}" in state.pods:
                    continue
                template = ds.pod
                if tolerates_all(template.tolerations, hard) is not None:
                    continue
                if any(node.labels.get(k) != v for k, v in template.node_selector.items()):
                    continue
                if template.required_node_terms and not any(
                    all(r.matches(node.labels) for r in term) for term in template.required_node_terms
                ):
                    continue
                # The template's spec objects are shared (documents are never changed in place), so
                # the state parses a daemon pod's spec once per DaemonSet.
                raw = template.raw
                self.cluster.create(
                    "Pod",
                    {
                        **raw,
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            **(raw.get("metadata") or {}),
                            "name": pod_name,
                            "namespace": ds.namespace,
                        },
                        "spec": {**(raw.get("spec") or {}), "nodeName": name},
                        "status": {"phase": "Running"},
                    },
                )
        written = state.pods.keys() if first else pods_written
        for key in written:
            self._forget(key)
            pod = state.pods.get(key)
            if pod is not None and pod.is_daemonset_pod and pod.node_name:
                self._node_of[key] = pod.node_name
                self._on_node.setdefault(pod.node_name, set()).add(key)
        nodes = state.nodes.keys()
        doomed = {k for k in written if k in self._node_of and self._node_of[k] not in nodes}
        for name in nodes_written - nodes:
            doomed |= self._on_node.get(name, set())
        for key in sorted(doomed):
            namespace, _, pod_name = key.partition("/")
            self.cluster.delete_pod(namespace, pod_name)

    def _forget(self, key: str) -> None:
        name = self._node_of.pop(key, None)
        if name is not None:
            on_node = self._on_node[name]
            on_node.discard(key)
            if not on_node:
                del self._on_node[name]


def daemonset_doc(ds: Any) -> dict[str, Any]:
    """A DaemonSet as Kubernetes JSON, from the loader's parsed one (its template kept as a pod)."""
    pod = dict(ds.pod.raw)
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": ds.name, "namespace": ds.namespace},
        "spec": {
            "template": {
                "metadata": {k: meta[k] for k in ("labels", "annotations") if k in meta},
                "spec": pod.get("spec") or {},
            }
        },
    }
