"""Existing and in-flight capacity: the one owner of how a snapshot is adjusted before a solve.

- Every node of a pool counts toward the pool's limits while it exists, cordoned or being deleted too
  (its capacity is still paid for): counting it out early would let a solve launch past the limit.
- A node being deleted or cordoned takes no new pods (the pods of a deleting node are solved again with
  the pending ones by whoever calls `solve`).
- A node of ours that registered but is not initialized yet counts as what it will be: without the
  unregistered taint, the known ephemeral taints (not-ready, ...) and its claim's start-up taints, with
  the allocatable its claim promised (GPUs appear only when the device plugin starts), and until its claim
  is Registered with its claim's labels and taints (registration gives them). Otherwise a solve during
  registration launches a second node. Initialized nodes are tried before it.
- A node no pool owns (a managed node group, a node added by hand) is capacity like any other:
  kube-scheduler places pods there whatever their pool list (Karpenter counts it too).
- A claim in flight offers the allocatable of its chosen type (else its first option), and a node that
  is starting what its claim promised, less what the daemonsets that will run there and run no pod there
  yet request: on a node, those its labels admit; on a claim, those its requirements and launch leave
  possible. A daemonset kept to another zone takes nothing.

Callers (the provisioning controller, the disruption planner, simulate) pass the snapshot as it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.api import labels as wk
from provisioner.api import quantities
from provisioner.api.common import is_true
from provisioner.api.nodeclaim import REGISTERED
from provisioner.scheduling import requirements as rq
from provisioner.scheduling.offerings import PoolType
from provisioner.scheduling.pools import Pool, count_node, daemonset_may_run_on, daemonset_runs_on
from provisioner.scheduling.resources import Dims, Vec, minus, plus
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import DaemonSet, HostPort, Pod, TaintValue

DEFAULT_MAX_PODS = 110
"""Pods a node takes when its allocatable does not say (the kubelet's default)."""


@dataclass(slots=True, eq=False)
class Existing:
    """A node or claim in flight that may take pods in this solve, with what it has left."""

    index: int
    state: StateNode
    name: str
    hostname: str
    labels: Mapping[str, str]
    taints: tuple[TaintValue, ...]
    avail: Vec
    pool: str | None
    """The pool that owns it; None for a node no pool owns (no pool label, no claim): such a node is
    capacity for every pod, whatever its pool list."""
    label_ok: dict[int, bool] = field(default_factory=dict)
    """Per variant id: whether the node's labels meet the variant's requirements (cached)."""
    taint_ok: dict[int, bool] = field(default_factory=dict)
    """Per variant id: whether the variant tolerates the node's taints (cached)."""
    host_ports: list[HostPort] = field(default_factory=list)
    """Host ports its running pods (and the pods placed on it in this solve) hold."""

    def domain(self, key: str) -> str | None:
        if key == wk.HOSTNAME:
            return self.hostname
        return self.labels.get(key)


def capacity(
    snapshot: Snapshot,
    pools: Mapping[str, Pool],
    *,
    dims: Dims,
    daemonsets: Sequence[DaemonSet],
) -> list[Existing]:
    """The snapshot's nodes that may take pods (initialized nodes by name, then nodes still starting, then
    claims in flight, as Karpenter orders initialized nodes before the others), after counting every node
    toward its pool's limits (`Pool.used`)."""
    ready: list[StateNode] = []
    starting: list[StateNode] = []
    flight: list[StateNode] = []
    for sn in snapshot.nodes:
        pool = pools.get(sn.nodepool or "")
        if pool is not None and pool.limits:
            count_node(pool, _capacity_of(sn, pools, dims=dims))
        if sn.deleting or sn.cordoned:
            continue
        if sn.in_flight:
            flight.append(sn)
        elif sn.claim is not None and not sn.initialized:
            starting.append(sn)
        else:
            ready.append(sn)
    out: list[Existing] = []
    by_name = sorted(ready, key=lambda n: n.name)
    by_name += sorted(starting, key=lambda n: n.name)
    by_name += sorted(flight, key=lambda n: n.name)
    for sn in by_name:
        labels = dict(sn.labels)
        taints = sn.taints
        alloc_map = sn.allocatable
        if not alloc_map:
            claim_type = _claim_type(sn, pools)
            if sn.in_flight and claim_type is None:
                continue
            # The type's allocatable before any daemonset: which daemonsets run here is decided below,
            # for this node, not for every zone the type is offered in.
            alloc = plus(claim_type.alloc, claim_type.ds_overhead) if claim_type is not None else dims.zero
        else:
            alloc = dims.vec(alloc_map)
            if quantities.PODS not in alloc_map:
                pods_dim = dims.index[quantities.PODS]
                alloc = tuple(DEFAULT_MAX_PODS if i == pods_dim else a for i, a in enumerate(alloc))
        registering = sn.node is not None and sn.claim is not None and not sn.initialized
        if registering:
            labels, taints = _registered(sn, labels, taints)
            taints, alloc = _starting(sn, taints, alloc, pools, dims=dims)
        if sn.in_flight or registering:
            # Daemon pods not running there yet will: keep room for them.
            alloc = minus(alloc, _daemon_room(sn, labels, taints, daemonsets, dims=dims))
        out.append(
            Existing(
                index=len(out),
                state=sn,
                name=sn.name,
                hostname=labels.get(wk.HOSTNAME, sn.name),
                labels=labels,
                taints=tuple(taints),
                avail=minus(alloc, dims.vec(sn.requested)),
                pool=sn.nodepool,
                host_ports=[hp for p in sn.pods if not p.is_terminal for hp in p.host_ports],
            )
        )
    return out


def ports_conflict(wanted: Sequence[HostPort], held: Sequence[HostPort]) -> bool:
    """Whether a pod binding `wanted` would clash with ports a node's pods already hold."""
    return any(w.conflicts(h) for w in wanted for h in held)


def anti_affine_pods(nodes: Sequence[Existing]) -> list[Pod]:
    """The running pods of these nodes with required anti-affinity: they block the pods they select."""
    return [p for n in nodes for p in n.state.pods if p.anti_affinity_required and not p.is_terminal]


def _daemon_room(
    sn: StateNode,
    labels: Mapping[str, str],
    taints: Sequence[TaintValue],
    daemonsets: Sequence[DaemonSet],
    *,
    dims: Dims,
) -> Vec:
    """What the daemonsets that will run on a new node, and run no pod there yet, request. On a node, those
    whose selectors its labels meet; on a claim in flight, those its requirements (and the zone, type and
    capacity type it launched with) leave possible. A daemonset held off by node affinity (another zone)
    takes nothing (Karpenter's "should not subtract daemonset overhead that is not strictly compatible")."""
    room = dims.zero
    if not daemonsets:
        return room
    running = {(p.namespace, p.owner_name) for p in sn.pods if p.is_daemonset_pod}
    reqs = _claim_reqs(sn) if sn.node is None else None
    for ds in daemonsets:
        if (ds.namespace, ds.name) in running:
            continue
        if reqs is None:
            runs = daemonset_runs_on(ds, labels, taints)
        else:
            runs = daemonset_may_run_on(ds, reqs, taints)
        if runs:
            room = plus(room, dims.vec(ds.pod.requests))
    return room


def _claim_reqs(sn: StateNode) -> rq.Reqs:
    """A claim's requirements with its labels (its pool, the pool's custom labels) and what its launch
    settled (zone, instance type, capacity type)."""
    assert sn.claim is not None
    status = sn.claim.status
    known = {
        wk.ZONE: status.zone,
        wk.INSTANCE_TYPE: status.instance_type,
        wk.CAPACITY_TYPE: status.capacity_type,
    }
    launched = rq.from_labels({**sn.claim.metadata.labels, **{k: v for k, v in known.items() if v}})
    return rq.from_api(sn.claim.spec.requirements).intersect(launched)


def _registered(
    sn: StateNode, labels: dict[str, str], taints: Sequence[TaintValue]
) -> tuple[dict[str, str], tuple[TaintValue, ...]]:
    """The labels and taints of a node whose claim is not registered yet as registration will give them
    (`controllers.lifecycle.registration`): its claim's labels (its pool's, the pool's own) and taints,
    which only the claim carries until then (Karpenter reads an unregistered node's labels off its
    claim too). Without them a pod selecting its pool would not fit there, and a solve made then (a new
    holder of its shard, a restart) would launch a second node for it."""
    assert sn.claim is not None
    if is_true(sn.claim.status.conditions, REGISTERED):
        return labels, tuple(taints)
    have = {(t.key, t.effect) for t in taints}
    added = [
        TaintValue(key=t.key, effect=t.effect.value, value=t.value)
        for t in sn.claim.spec.taints
        if (t.key, t.effect.value) not in have
    ]
    return {**labels, **sn.claim.metadata.labels}, (*taints, *added)


def _starting(
    sn: StateNode, taints: Sequence[TaintValue], alloc: Vec, pools: Mapping[str, Pool], *, dims: Dims
) -> tuple[tuple[TaintValue, ...], Vec]:
    """A node that registered but is not initialized yet still carries its start-up taints, the
    unregistered taint and taints such as not-ready (`EPHEMERAL_TAINTS`), and its device plugins may not report GPUs yet: pods need not tolerate those
    taints, and it offers what its claim promised (both clear once it is initialized)."""
    assert sn.claim is not None
    spec = sn.claim.spec
    kept = tuple(t for t in taints if not spec.is_startup_taint(t.key, t.effect) and not ephemeral(t))
    promised: Vec | None = None
    if sn.claim.status.allocatable:
        promised = dims.vec(sn.claim.status.allocatable_amounts())
    else:
        claim_type = _claim_type(sn, pools)
        promised = plus(claim_type.alloc, claim_type.ds_overhead) if claim_type is not None else None
    if promised is not None:
        alloc = tuple(map(max, alloc, promised))
    return kept, alloc


EPHEMERAL_TAINTS = frozenset(
    {
        ("node.kubernetes.io/not-ready", "NoSchedule", None),
        ("node.kubernetes.io/not-ready", "NoExecute", None),
        ("node.kubernetes.io/unreachable", "NoSchedule", None),
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule", "true"),
    }
)
"""Taints a node carries while it starts, whoever sets them (Karpenter's known ephemeral taints, matched
by key and effect, and value where one is given), besides our unregistered taint and `readiness.k8s.io/`
taints of the node readiness controller."""


def ephemeral(t: TaintValue) -> bool:
    """Whether `t` is a taint a node carries only while it starts (`EPHEMERAL_TAINTS`)."""
    if t.key == wk.UNREGISTERED_TAINT or t.key.startswith("readiness.k8s.io/"):
        return True
    return (t.key, t.effect, None) in EPHEMERAL_TAINTS or (t.key, t.effect, t.value) in EPHEMERAL_TAINTS


def _capacity_of(sn: StateNode, pools: Mapping[str, Pool], *, dims: Dims) -> Vec:
    if sn.node is not None and sn.node.capacity:
        return dims.vec(sn.node.capacity)
    if sn.claim is not None and sn.claim.status.capacity:
        return dims.vec(sn.claim.status.capacity_amounts())
    t = _claim_type(sn, pools)
    return t.capacity if t is not None else dims.vec(sn.allocatable)


def _claim_type(sn: StateNode, pools: Mapping[str, Pool]) -> PoolType | None:
    """The instance type a claim will most likely be (its chosen type, else its first option)."""
    if sn.claim is None:
        return None
    pool = pools.get(sn.claim.nodepool or "")
    if pool is None:
        return None
    wanted = sn.claim.status.instance_type or next(iter(sn.claim.instance_type_options()), None)
    return next((t for t in pool.types if t.it.name == wanted), None)
