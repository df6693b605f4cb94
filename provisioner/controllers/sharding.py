"""One sharded replica's part of the controllers: the ClusterState its pool controllers read (its pools,
their nodes and claims, the pending pods it takes: `provisioner.scheduling.shards.scope`), the pass
on of a pod none of its pools could take (the `provisioner.sh/nodepools-tried` annotation), the pods'
`provisioner.sh/shard` label its pod watch selects by (`ShardLabels`), the check of a node's pods at
the API server before disruption acts on it (`Sharding.confirm`), and the fences at the write: a claim
only for a pool whose shard it holds (`ShardedCluster`), an admission only while it holds the admission
Lease (`AdmissionCluster`), each write carrying that Lease's renew deadline as its own (`writes_until`):
the API server abandons it by then, before the Lease can pass to another replica, however long the
request waited there.

Which shards this replica holds, and whether it holds quota admission, come from outside (the Leases:
`provisioner.kube.shards.ShardLeases`) as callables, read at every snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.clock import Clock
from provisioner.clusterapi import ClusterAPI, ClusterError, NotFoundError, NotLeader, writes_until
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.watch import FIRST, Watch
from provisioner.scheduling import Unschedulable
from provisioner.scheduling import shards as model
from provisioner.scheduling.pool_order import ClusterDefaults
from provisioner.state import ClusterState, Snapshot
from provisioner.state.cluster import Changes
from provisioner.state.objects import Pod
from provisioner.state.snapshot import StateNode

log = logging.getLogger(__name__)

GLOBAL_CONTROLLERS = frozenset({"interruption", "admission", "requestquota", "gc"})
"""Controllers whose decisions span pools: run only by the replica holding quota admission, on the
whole state (the garbage collector then sees every claim, so it never takes another shard's instance
for an orphan). Of the pods, that replica's state holds what they need besides its shards': every pod
of the namespaces quota counts in (`kube.shards.admission_namespaces`), checked by `unlisted`."""


def unlisted(listed: frozenset[str] | None, snap: Snapshot) -> frozenset[str]:
    """The namespaces quota counts in for `snap` (`model.quota_namespaces`) whose pods are not all in
    the state yet: not among `listed` (`Sharding.counted_namespaces`, read before `snap` was taken;
    None: the state holds every pod). A quota decision waits for them: it would undercount a team."""
    if listed is None:
        return frozenset()
    return model.quota_namespaces(snap.teams, snap.namespaces) - listed


@dataclass(kw_only=True, eq=False)
class Sharding:
    """What a replica holds (`owned_shards`, `holds_admission`) and the views built from it."""

    shards: int
    owned_shards: Callable[[], frozenset[int]]
    holds_admission: Callable[[], bool]
    clock: Clock
    defaults: ClusterDefaults = field(default_factory=ClusterDefaults)
    node_pods: Callable[[str], Sequence[Mapping[str, Any]]] | None = None
    """The pods the API server has on a node, watched here or not (a field selector): disruption checks
    its verdict against them (`confirm`). None: the state holds every pod."""
    node_labels: Callable[[str], Mapping[str, str] | None] | None = None
    """A Node's labels as the API server has them (None: no such Node), for a pod bound to a Node this
    replica does not watch (another shard's: `ShardLabels` gives the pod that Node's shard). None: the
    state holds every Node."""
    quota_namespaces: Callable[[frozenset[str]], frozenset[str]] | None = None
    """Of the namespaces given, those whose pods a Team's quota counts at the API server now (read there,
    not from the state): quota admission asks before it admits a gated pod of a namespace of no team in
    its state as a pod of no team, since the Team's watch event may not have come yet. None: the state
    is the cluster."""
    counted_namespaces: Callable[[], frozenset[str] | None] = lambda: None
    """The namespaces whose every pod the state holds (their watches listed), besides its shards' pods:
    quota admission counts a team's pods only once all its namespaces are among them
    (`AdmissionController.counted_namespaces`). None: the state holds every pod."""
    acting_until: Callable[[int | None], datetime | None] | None = None
    """When this replica's right to write for a shard (None: quota admission) ends, the renew deadline
    of its Lease (None then: it does not hold it): the deadline of each write made under that right
    (`ShardedCluster`, `AdmissionCluster`). None: no Lease bounds the writes (tests)."""
    _pool_shards: dict[str, int] = field(default_factory=dict, init=False)
    _last: tuple[Snapshot, frozenset[int], int, model.Scoped] | None = field(default=None, init=False)
    routes: model.RouteCache = field(default_factory=model.RouteCache, init=False)
    """Each pending pod's route, kept across views: a view routes only the pods written since the last."""

    def holds_any(self) -> bool:
        return self.holds_admission() or bool(self.owned_shards())

    def _owns(self, held: frozenset[int]) -> Callable[[str], bool]:
        def owns(pool: str) -> bool:
            shard = self._pool_shards.get(pool)
            if shard is None:
                shard = self._pool_shards[pool] = model.shard_of(pool, self.shards)
            return shard in held

        return owns

    def scoped(self, snap: Snapshot, held: frozenset[int]) -> model.Scoped:
        """`snap` as a replica holding the shards `held` sees it now; the same object while nothing it
        depends on changed. `held` must be read before `snap` was taken (`ShardedState.snapshot`)."""
        now = self.clock.now()
        # Tried pools expire with time: look again every few seconds even when nothing was written.
        tick = int(now.timestamp() // 5)
        last = self._last
        if last is not None and last[0] is snap and last[1] == held and last[2] == tick:
            return last[3]
        self.routes.held = held
        scoped = model.scope(snap, owns=self._owns(held), defaults=self.defaults, now=now, cache=self.routes)
        self._last = (snap, held, tick, scoped)
        return scoped

    @property
    def retry_at(self) -> datetime | None:
        """`Scoped.retry_at` of the last view made."""
        return self._last[3].retry_at if self._last is not None else None

    def take(self, pods: Sequence[Pod], state: ClusterState) -> list[Pod]:
        """Of pods that are not in the cluster (a ProvisioningRequest's), the ones this replica takes."""
        held = self.owned_shards()  # before the snapshot: see ShardedState.snapshot
        taken, _, _ = model.take(
            pods, state.snapshot(), owns=self._owns(held), defaults=self.defaults, now=self.clock.now()
        )
        return taken

    def state(self, state: ClusterState) -> ClusterState:
        """`state` as this replica's pool controllers read it."""
        return ShardedState(state, self)  # type: ignore[return-value]

    def cluster(self, cluster: ClusterAPI) -> ClusterAPI:
        """`cluster` as this replica's pool controllers write through it."""
        return ShardedCluster(cluster, self)

    def admission_cluster(self, cluster: ClusterAPI) -> ClusterAPI:
        """`cluster` as quota admission writes through it (`AdmissionCluster`)."""
        return AdmissionCluster(cluster, self)

    def owns_now(self, pool: str) -> bool:
        """Whether this replica holds the pool's shard at this moment."""
        return self._owns(self.owned_shards())(pool)

    def pool_deadline(self, pool: str, what: str) -> datetime | None:
        """When a write for `pool` must have ended: its shard Lease's renew deadline (None: no Lease
        bounds it). NotLeader, naming `what`, when this replica does not hold the pool's shard now."""
        refusal = f"{what}: this replica no longer holds pool {pool}'s shard"
        held = self.owns_now(pool)  # and the pool's shard is known from here on
        return self._deadline(held, self._pool_shards[pool], refusal)

    def admission_deadline(self, what: str) -> datetime | None:
        """When a write of quota admission must have ended: the admission Lease's renew deadline (None:
        no Lease bounds it). NotLeader, naming `what`, when this replica does not hold admission now."""
        refusal = f"{what}: this replica no longer holds quota admission"
        return self._deadline(self.holds_admission(), None, refusal)

    def _deadline(self, held: bool, shard: int | None, refusal: str) -> datetime | None:
        deadline = self.acting_until(shard) if held and self.acting_until is not None else None
        if not held or (self.acting_until is not None and deadline is None):
            raise NotLeader(refusal)
        return deadline

    def pass_on(
        self, cluster: ClusterAPI, state: ClusterState, unschedulable: Sequence[Unschedulable], now: datetime
    ) -> None:
        """Name the pools tried on each pod they could not take whose list goes on in other shards, and
        label it with the next pool's shard, so the holder of that pool watches and takes it."""
        last = self._last
        runs = last[3].runs if last is not None else {}
        lists: tuple[model.PoolLists, frozenset[str]] | None = None
        for u in unschedulable:
            run = runs.get(u.pod.key)
            if run is None:
                continue
            annotations = model.passed_on(run, u.pod, now)
            meta: dict[str, Any] = {"annotations": annotations}
            # Its list as written (the view gave the pod its run here as its list).
            pod = state.pods.get(u.pod.key)
            if pod is not None:
                if lists is None:
                    snap = state.snapshot()
                    lists = model.PoolLists.of(snap, self.defaults), frozenset(p.name for p in snap.nodepools)
                moved = replace(pod, annotations={**pod.annotations, **annotations})
                shard = model.wanted_shard(moved, lists[0], lists[1], self.shards, now, None)
                if shard is not None:
                    meta["labels"] = {model.SHARD: shard}
            try:
                cluster.patch_pod(u.pod.namespace, u.pod.name, {"metadata": meta})
            except ClusterError as err:
                log.warning("could not pass pod %s on from pools %s: %s", u.pod.key, ",".join(run), err)
                continue
            log.info("pod %s passed on: pools %s cannot take it", u.pod.key, ",".join(run))

    def confirm(self, nodes: Sequence[StateNode], state: ClusterState, cluster: ClusterAPI) -> bool:
        """Before disruption acts on `nodes` (its verdict made from this replica's state, which holds the
        pods of its shards only): whether the API server has no pod on them that the state lacks (one
        labelled for another shard and not relabelled yet, or never labelled). Such a pod is labelled
        with its node's shard, so the watch brings it and the next plan counts it."""
        if self.node_pods is None:
            return True
        seen = True
        for sn in nodes:
            if sn.node is None:
                continue  # not registered: no pod can be bound to it yet
            try:
                items = self.node_pods(sn.node.name)
            except ClusterError as err:
                log.warning("disruption: cannot list the pods on node %s: %s", sn.node.name, err)
                return False
            for item in items:
                pod = Pod.from_dict(item)
                if pod.key in state.pods or pod.phase in ("Succeeded", "Failed"):
                    continue
                seen = False
                log.info(
                    "disruption: pod %s on node %s was not watched here; not acting yet", pod.key, sn.name
                )
                if sn.nodepool is not None and pod.labels.get(model.SHARD) is None:
                    shard = str(model.shard_of(sn.nodepool, self.shards))
                    try:
                        cluster.patch_pod(
                            pod.namespace, pod.name, {"metadata": {"labels": {model.SHARD: shard}}}
                        )
                    except ClusterError as err:
                        log.warning("could not label pod %s with shard %s: %s", pod.key, shard, err)
        return seen


class ShardedState:
    """A ClusterState whose `snapshot()` is one replica's part of it, and whose change feeds also report
    what changes that part without a write (`ScopedChanges`); everything else is the state's."""

    def __init__(self, state: ClusterState, sharding: Sharding) -> None:
        self._state = state
        self._sharding = sharding

    def snapshot(self) -> Snapshot:
        # The held shards first, then the state. A shard counts as held only once the claims its last
        # holder wrote are in the state (`ShardLeases.on_acquire` catches up before it is acted on), so
        # a state read after the shards holds them. Read the other way round, a shard won between the
        # two reads would show its pending pods without its in-flight claims, and they would be solved
        # again: a second claim per pod beside the dead replica's.
        held = self._sharding.owned_shards()
        return self._sharding.scoped(self._state.snapshot(), held).snapshot

    def changes(self, kind: str) -> ScopedChanges:
        return ScopedChanges(self._state.changes(kind), self._sharding)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


class ScopedChanges:
    """A change feed (`ClusterState.changes`) that also reports `EVERYTHING` when this replica's part of
    the cluster changed with nothing written: it took or gave up a shard, or a pod every pool refused is
    due to start again. Controllers that sleep while nothing is written then look again."""

    EVERYTHING = "*"

    def __init__(self, feed: Changes, sharding: Sharding) -> None:
        self._feed = feed
        self._sharding = sharding
        self._held = sharding.owned_shards()

    def take(self) -> set[str]:
        keys = self._feed.take()
        held = self._sharding.owned_shards()
        retry_at = self._sharding.retry_at
        if held != self._held or (retry_at is not None and self._sharding.clock.now() >= retry_at):
            self._held = held
            keys = keys | {self.EVERYTHING}
        return keys


class ShardedCluster:
    """A ClusterAPI that writes a NodeClaim only while this replica holds its pool's shard, checked at
    the write: a pass that began before the shard was lost (its Lease not renewed in time, under load)
    writes no claim the shard's new holder may be solving too. The write must end by the shard Lease's
    renew deadline: one held up at the API server is abandoned there before the Lease can expire, so it
    cannot land after the new holder listed the claims. Everything else is the cluster's."""

    def __init__(self, cluster: ClusterAPI, sharding: Sharding) -> None:
        self._cluster = cluster
        self._sharding = sharding

    def create_nodeclaim(self, claim: NodeClaim) -> NodeClaim:
        pool = claim.nodepool
        if pool is None:
            return self._cluster.create_nodeclaim(claim)
        with writes_until(self._sharding.pool_deadline(pool, f"NodeClaim {claim.name}")):
            return self._cluster.create_nodeclaim(claim)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


class AdmissionCluster:
    """A ClusterAPI through which quota admission writes its decisions (lifting a pod's gate, evicting for
    a reclaim, a ProvisioningRequest's quota word) only while this replica holds the admission Lease,
    checked at each write: a pass begun as holder whose Lease then lapsed (its renewals starved under
    load) would otherwise go on admitting after a new holder, deciding from its own picture, took over,
    and two deciders could admit the same room. Each write must end by the admission Lease's renew
    deadline, so one held up at the API server cannot land after a new holder took over and counted
    the admitted pods. Everything else is the cluster's."""

    def __init__(self, cluster: ClusterAPI, sharding: Sharding) -> None:
        self._cluster = cluster
        self._sharding = sharding

    def patch_pod(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        with writes_until(self._sharding.admission_deadline(f"patch Pod {namespace}/{name}")):
            self._cluster.patch_pod(namespace, name, patch)

    def evict_pod(self, namespace: str, name: str) -> None:
        with writes_until(self._sharding.admission_deadline(f"evict Pod {namespace}/{name}")):
            self._cluster.evict_pod(namespace, name)

    def patch_provisioning_request(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        what = f"patch ProvisioningRequest {namespace}/{name}"
        with writes_until(self._sharding.admission_deadline(what)):
            self._cluster.patch_provisioning_request(namespace, name, patch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


@dataclass(kw_only=True, eq=False)
class ShardLabels(Reconciler):
    """Keeps the pods' `provisioner.sh/shard` label on the shard that acts on them next
    (`model.wanted_shard`), so each replica's pod watch (a label selector) brings it the pods it acts on.

    Every replica labels the pods whose label names a shard it holds: a pending pod whose next pool is
    in another shard (its pool list or its team's changed), a pod bound to a node of another shard's
    pool (kube-scheduler placed it on spare room there). The replica holding quota admission, which
    also watches the pods whose label names no shard, labels them: pods created while the webhook was
    off, or before `--shards` was set. It runs on the pods written since its last pass, and
    on every pod it holds when its shards or the pools' lists change."""

    sharding: Sharding
    _watch: Watch = field(init=False)
    _held: tuple[frozenset[int], bool] | None = field(default=None, init=False)
    _failed: set[str] = field(default_factory=set, init=False)
    """Pods whose label could not be written: tried again at the next pass."""
    _unplaced: set[str] = field(default_factory=set, init=False)
    """Bound pods whose node this replica did not know yet: looked at again when Nodes are written."""
    _read: dict[str, Mapping[str, str] | None] = field(default_factory=dict, init=False)
    """Nodes not watched here read from the API server in this pass: name -> labels (None: none such)."""

    def __post_init__(self) -> None:
        self._watch = Watch(self.state, ("Pod", "Node", "NodePool", "Team", "Namespace"))

    def reconcile(self, now: datetime) -> None:
        written = self._watch.take()
        held = self.sharding.owned_shards()
        admits = self.sharding.holds_admission()
        if not written and not self._failed and self._held == (held, admits):
            return
        if (
            self._held != (held, admits)
            or any(k not in ("Pod", "Node") for k in written)
            or written.get("Pod") == FIRST
        ):
            keys: Iterable[str] = list(self.state.pods.keys())
        else:
            keys = {*written.get("Pod", ()), *self._failed, *(self._unplaced if "Node" in written else ())}
        self._held = (held, admits)
        self._failed = set()
        self._read = {}
        if not held and not admits:
            return
        snap = self.state.snapshot()
        lists = model.PoolLists.of(snap, self.sharding.defaults)
        existing = frozenset(p.name for p in snap.nodepools)
        names = {str(i) for i in range(self.sharding.shards)}
        mine = {str(i) for i in held}
        for key in keys:
            pod = self.state.pods.get(key)
            if pod is None or pod.phase in ("Succeeded", "Failed"):
                continue
            label = pod.labels.get(model.SHARD)
            if label not in mine and not (admits and label not in names):
                continue
            node = self.state.nodes.get(pod.node_name) if pod.node_name else None
            labels = node.labels if node is not None else self._node_labels(pod.node_name)
            pool = labels.get(wk.NODEPOOL) if labels is not None else None
            if pod.node_name and labels is None:
                self._unplaced.add(key)
            else:
                self._unplaced.discard(key)
            wanted = model.wanted_shard(pod, lists, existing, self.sharding.shards, now, pool)
            if wanted is None or wanted == label:
                continue
            try:
                self.cluster.patch_pod(
                    pod.namespace, pod.name, {"metadata": {"labels": {model.SHARD: wanted}}}
                )
            except NotFoundError:
                continue
            except ClusterError as err:
                log.warning("could not label pod %s with shard %s: %s", key, wanted, err)
                self._failed.add(key)

    def _node_labels(self, name: str | None) -> Mapping[str, str] | None:
        """The labels of a Node this replica does not watch (another shard's), from the API server
        (once a pass per Node)."""
        if not name or self.sharding.node_labels is None:
            return None
        if name not in self._read:
            try:
                self._read[name] = self.sharding.node_labels(name)
            except ClusterError as err:
                log.warning("could not read node %s: %s", name, err)
                self._read[name] = None
        return self._read[name]
