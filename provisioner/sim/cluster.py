"""What a real cluster does around the provisioner, for `provisioner simulate` with time: the embedded API
server (a MemoryCluster), kubelets that register a Node for each launched instance, the GPU operator that
lifts start-up taints and whose MIG manager applies a Node's MIG layout, the workload controllers that
recreate evicted pods and the DaemonSet controller; kube-scheduler binding pending pods where they fit is
`sim.binder`'s.

None of it decides anything the provisioner decides; it only makes the world answer as a cluster would,
deterministically: the same scenario gives the same names, bindings and order every run. Each stand-in
looks at what was written since its last sync (`ClusterState.changes`), not at the whole cluster.

About 460 lines: one small stand-in per cluster component, each a class or two functions; the one that
grows past that moves to its own module, as the pool-scoped catalog wrapper (`sim.pool_types`) and the
binder (`sim.binder`) did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from provisioner.api import NodeClaim, accelerators, durations, mig
from provisioner.api import labels as wk
from provisioner.api.common import is_true
from provisioner.api.nodeclaim import DISRUPTING
from provisioner.api.nodepool import DisruptionReason
from provisioner.clock import isoformat
from provisioner.cloudprovider import Instance, InstanceType, registry
from provisioner.cloudprovider.plugin import NodeMaker
from provisioner.cloudprovider.types import with_mig_layout
from provisioner.clusterapi import MemoryCluster, NotFoundError, merge_patch
from provisioner.sim.kube_documents import RUNS_FOR
from provisioner.state.objects import Pod, tolerates_all

VOLUNTARY = frozenset(r.value for r in DisruptionReason)
"""The reasons the disruption controller writes (Underutilized, Empty, Drifted, Expired, ...)."""


ROUTINE_EVENTS = frozenset({"Nominated", "Disrupting", "Admitted"})
"""Events a run leaves out: one per pod or node of every batch and command, said otherwise (the claims'
pods, the actions, the teams). Not kept at all: a 100,000-pod run would hold a Nominated Event per pod."""


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

    def record_event(
        self,
        *,
        kind: str,
        name: str,
        namespace: str | None = None,
        reason: str,
        message: str,
        type: str = "Normal",
    ) -> None:
        if reason not in ROUTINE_EVENTS:
            super().record_event(
                kind=kind, name=name, namespace=namespace, reason=reason, message=message, type=type
            )

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
    gated: Mapping[str, Any] = merge_patch(
        doc, {"spec": {"schedulingGates": [*_gates(doc), {"name": wk.ADMISSION_GATE}]}}
    )
    return gated


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
    mig_apply: timedelta = timedelta(seconds=60)
    """From registration to the MIG manager having applied the layout a Node's `nvidia.com/mig.config`
    names (the GPUs are reset): its slices are pending until then."""
    launched: dict[str, Instance] = dataclasses.field(default_factory=dict)
    deleted: list[Instance] = dataclasses.field(default_factory=list)
    registered: set[str] = dataclasses.field(default_factory=set)

    def __post_init__(self) -> None:
        nodes = registry.simulator_plugin().nodes
        if nodes is None:
            raise registry.PluginError("the simulator's cloud makes no Nodes for its instances")
        self._maker: NodeMaker = nodes
        # The GPU operator looks at the Nodes (and the claims naming them) written since it last looked:
        # a Node and claim unchanged since then were decided on then.
        self._nodes = self.cluster.state.changes("Node")
        self._claims = self.cluster.state.changes("NodeClaim")
        self._claim_of: dict[str, str] = {}
        """Node name -> the claim whose status names it."""
        self._node_of: dict[str, str] = {}
        """Claim -> the node name its status gives."""
        self._looked = False
        self._mig_pending: dict[str, datetime | None] = {}
        """Nodes whose MIG layout is not applied yet -> when they registered (None: not yet)."""

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
            it = self.types.get(inst.instance_type)
            claim = state.claims.get(inst.nodeclaim or "")
            layout = mig.layout_of(claim.metadata.labels) if claim is not None else None
            if it is not None and layout is not None:
                # The layout is among the kubelet's labels from its first moment (the MIG manager acts on
                # it before the provisioner registers the Node); its slices wait for the MIG manager.
                parted = with_mig_layout(it, layout)
                if not isinstance(parted, str):
                    it = parted
                manifest = self._maker.node_for_instance(inst, it, devices=False, now=now)
                manifest["metadata"]["labels"][mig.MIG_STATE_LABEL] = "pending"
            else:
                manifest = self._maker.node_for_instance(inst, it, now=now)
            self.cluster.create("Node", manifest)
            if mig.MIG_STATE_LABEL in manifest["metadata"]["labels"]:
                self._mig_pending[manifest["metadata"]["name"]] = None
            self.registered.add(pid)
        for inst in self.deleted:
            name = self._maker.node_name_for(inst)
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
        self._apply_mig_layouts(now)
        for name in sorted(look):
            node = state.nodes.get(name)
            claim = state.claims.get(self._claim_of.get(name, ""))
            if node is None or claim is None or node.labels.get(wk.REGISTERED) != "true":
                continue
            startup = {t.key for t in claim.spec.startup_taints}
            if startup and any(t.key in startup for t in node.taints):
                kept = [t.to_dict() for t in node.taints if t.key not in startup]
                self.cluster.patch_node(name, {"spec": {"taints": kept}})

    def _apply_mig_layouts(self, now: datetime) -> None:
        """The MIG manager: `mig_apply` after a Node with a pending layout registered, its slices are
        allocatable and `nvidia.com/mig.config.state` is `success`."""
        state = self.cluster.state
        for name in sorted(self._mig_pending):
            node = state.nodes.get(name)
            if node is None:
                self._mig_pending.pop(name)
                continue
            since = self._mig_pending[name]
            if since is None:
                if node.labels.get(wk.REGISTERED) == "true":
                    self._mig_pending[name] = now
                continue
            if now - since < self.mig_apply:
                continue
            self._mig_pending.pop(name)
            slices = {k: str(v) for k, v in node.capacity.items() if accelerators.is_mig(k)}
            self.cluster.patch_node(
                name,
                {
                    "metadata": {"labels": {mig.MIG_STATE_LABEL: "success"}},
                    "status": {"allocatable": {**node.raw["status"]["allocatable"], **slices}},
                },
            )


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
