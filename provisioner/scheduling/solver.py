"""The scheduling simulator: pods in, Results out (placements, new NodeClaims, unschedulable pods with one
reason per pool). Pure and deterministic: no clock, no I/O, no randomness.

How it decides, in order for each pod (largest first: GPUs, then cpu, then memory):
1. existing nodes with room, then claims in flight, then the nodes this solve already opened;
2. else a new node from the first pool (annotation `provisioner.sh/nodepools`, else weight desc, name)
   that tolerates it, whose requirements meet the pod's, with a type big enough, an available offering,
   room under its limits and a domain its topology constraints accept.
A new node keeps every instance type that can still hold its pods; the cheapest one wins at the end
(first fit, like Karpenter), but a pod joins a node only when that costs no more than a node of its own.
Preferences (preferred node/pod affinity, ScheduleAnyway spreads) are tried as requirements first and
relaxed one step at a time when they cannot be met.

Speed comes from doing per shape what does not depend on the pod's name: pods with equal constraints
and requests share one compiled `_Variant`, whose per-pool verdicts are cached, and resources are tuples
of integers over a per-solve index.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.api import NodePool, quantities
from provisioner.api import labels as wk
from provisioner.cloudprovider.types import InstanceType, Offering
from provisioner.scheduling import requirements as rq
from provisioner.scheduling.results import NewClaim, Placement, PoolReason, Results, Unschedulable
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import (
    DaemonSet,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    TaintValue,
    Toleration,
    tolerates_all,
)

MAX_OPTIONS = 60
INF = float("inf")
_add = operator.add
_sub = operator.sub
_le = operator.le

# Keys a new node gets from its instance type (the rest come from the pool or not at all).
_TYPE_KEYS = frozenset(
    {
        wk.INSTANCE_TYPE,
        wk.INSTANCE_FAMILY,
        wk.INSTANCE_CPU,
        wk.INSTANCE_MEMORY,
        wk.GPU_NAME,
        wk.GPU_COUNT,
        wk.GPU_MEMORY,
        wk.GPU_MANUFACTURER,
        wk.ARCH,
        wk.OS,
        wk.REGION,
    }
)
_OFFERING_KEYS = frozenset({wk.ZONE, wk.CAPACITY_TYPE})


@dataclass(frozen=True, slots=True)
class SolveOptions:
    """Knobs of one solve. Defaults are what the controller uses."""

    max_options: int = MAX_OPTIONS
    """Most instance type options a new claim carries (cheapest first)."""
    cost_aware_packing: bool = True
    """A pod joins an open new node only if that costs no more than a node of its own."""
    claim_name_prefix: str = ""
    """Prefix of the placeholder names of new claims (`<prefix><pool>-<n>`)."""


# --------------------------------------------------------------------------------------------- helpers


def _fmt(resource: str, amount: int) -> str:
    return quantities.format_quantity(resource, amount)


def _fmt_list(names: Sequence[str], vec: Sequence[int], *, skip_zero: bool = True) -> str:
    return ", ".join(f"{n} {_fmt(n, a)}" for n, a in zip(names, vec, strict=True) if a or not skip_zero)


def _fmt_taint(t: TaintValue) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def _allowed_values(req: rq.KeyReq) -> frozenset[str] | None:
    if not req.present_ok:
        return frozenset()
    if req.allowed is not None:
        return req.allowed
    return None


def _offering_filter(
    reqs: rq.Reqs,
) -> tuple[frozenset[str] | None, frozenset[str] | None, rq.KeyReq, rq.KeyReq]:
    zreq, creq = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
    return _allowed_values(zreq), _allowed_values(creq), zreq, creq


def _cheapest_offering(it: InstanceType, reqs: rq.Reqs) -> Offering | None:
    zones, cts, zreq, creq = _offering_filter(reqs)
    best: Offering | None = None
    for o in it.offerings:
        if not o.available:
            continue
        if zones is not None and o.zone not in zones:
            continue
        if cts is not None and o.capacity_type not in cts:
            continue
        if not (zreq.matches(o.zone) and creq.matches(o.capacity_type)):
            continue
        if best is None or (o.price, o.zone, o.capacity_type) < (best.price, best.zone, best.capacity_type):
            best = o
    return best


def _any_offering(it: InstanceType, reqs: rq.Reqs) -> bool:
    """Whether some offering (available or not) is allowed by the requirements."""
    zreq, creq = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
    return any(zreq.matches(o.zone) and creq.matches(o.capacity_type) for o in it.offerings)


def _labels_ok(it: InstanceType, reqs: rq.Reqs) -> bool:
    labels = it.labels
    for key, req in reqs.items:
        if (key in _TYPE_KEYS or key in labels) and not req.matches(labels.get(key)):
            return False
    return True


_REQUESTED: dict[int, tuple[StateNode, dict[str, int]]] = {}
_ANTI: dict[int, tuple[StateNode, tuple[Pod, ...]]] = {}
_REQUESTED_MAX = 20_000
"""Entries kept before the memo starts over: about two snapshots of a 10,000-node cluster."""


def _anti_affine(sn: StateNode) -> tuple[Pod, ...]:
    """The running pods of a node with required anti-affinity (memoised like `_requested`)."""
    found = _ANTI.get(id(sn))
    if found is None or found[0] is not sn:
        if len(_ANTI) >= _REQUESTED_MAX:
            _ANTI.clear()
        pods = tuple(p for p in sn.pods if p.anti_affinity_required and not p.is_terminal)
        found = _ANTI[id(sn)] = (sn, pods)
    return found[1]


# ------------------------------------------------------------------------------------- compiled values


@dataclass(slots=True, eq=False)
class _Type:
    """An instance type as one pool sees it: allocatable after the pool's daemonsets, as a vector."""

    it: InstanceType
    alloc: tuple[int, ...]
    capacity: tuple[int, ...]
    ds_overhead: tuple[int, ...]


@dataclass(slots=True, eq=False)
class _Pool:
    index: int
    pool: NodePool
    name: str
    reqs: rq.Reqs
    label_keys: frozenset[str]
    taints: tuple[TaintValue, ...]
    types: list[_Type]
    """Every type of the pool's NodeClass whose labels meet the pool's requirements (available or not)."""
    limits: dict[int, int]
    """Dimension index -> limit (capacity), for the resources the pool limits; -1 is the node count."""
    used: dict[int, int]
    declared_types: int = 0
    min_values: tuple[tuple[str, int], ...] = ()
    """Karpenter's `minValues`: (key, n) where a claim's options must span n distinct values of key."""


def _value_of(t: _Type, offering: Offering, key: str) -> str | None:
    if key == wk.ZONE:
        return offering.zone
    if key == wk.CAPACITY_TYPE:
        return offering.capacity_type
    return t.it.labels.get(key)


def _short_of_min_values(pool: _Pool, options: Sequence[tuple[float, _Type, Offering]]) -> str | None:
    """Which `minValues` the options cannot meet, in plain words, or None."""
    for key, wanted in pool.min_values:
        values = {_value_of(t, o, key) for _, t, o in options} - {None}
        if len(values) < wanted:
            shown = ", ".join(sorted(v for v in values if v is not None)) or "none"
            return f"minValues {wanted} for {key}: only {len(values)} values fit ({shown})"
    return None


@dataclass(slots=True, eq=False)
class _Group:
    """Pods matching a selector in some namespaces, counted per domain of one topology key."""

    key: str
    selector: LabelSelector | None
    namespaces: frozenset[str] | None
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0
    pointers: dict[int, int] = field(default_factory=dict)
    """For hostname groups, per threshold n: index of the first open node holding fewer than n counted
    pods (counts only grow, so every node before it is blocked for good)."""

    def matches(self, pod: Pod) -> bool:
        if self.selector is None:
            return False
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        return self.selector.matches(pod.labels)

    def add(self, domain: str) -> None:
        self.counts[domain] = self.counts.get(domain, 0) + 1
        self.total += 1


@dataclass(slots=True, eq=False)
class _Spread:
    group: _Group
    max_skew: int
    hard: bool


@dataclass(slots=True, eq=False)
class _Variant:
    """One way of reading a pod's constraints (preferences as requirements, or relaxed)."""

    id: int
    alts: tuple[rq.Reqs, ...]
    tolerations: tuple[Toleration, ...]
    req: tuple[int, ...]
    pools: tuple[_Pool, ...]
    missing_pools: tuple[str, ...]
    pool_names: frozenset[str] | None
    order: tuple[str, ...]
    """Pool names in the order tried (the annotation's, unknown names included)."""
    spreads: list[_Spread]
    affinity: list[tuple[_Group, bool]]
    anti: list[_Group]
    blocked_by: list[_Group] = field(default_factory=list)
    member_of: list[_Group] = field(default_factory=list)
    owner_of: list[_Group] = field(default_factory=list)
    monotone: bool = True
    """Once a node refuses this variant it refuses it for the rest of the solve (no spread over a key
    other than hostname, no required affinity), so scans may resume where the last one stopped."""
    hint_existing: int = 0
    hint_new: int = 0
    pool_fit: dict[int, _PoolFit | str] = field(default_factory=dict)
    universe: dict[str, frozenset[str]] = field(default_factory=dict)
    host_blockers: list[tuple[_Group, int]] = field(default_factory=list)
    """Hostname groups that block a node once it holds `n` counted pods (anti-affinity: 1)."""
    has_topology: bool = False


@dataclass(slots=True, eq=False)
class _PoolFit:
    """A variant against a pool, before any node exists: narrowed requirements and the types that fit
    the pod alone (cheapest first, only available ones)."""

    reqs: rq.Reqs
    options: list[tuple[float, _Type, Offering]]
    standalone: float


@dataclass(slots=True, eq=False)
class _Shape:
    labels: Mapping[str, str]
    namespace: str
    variants: list[_Variant]


@dataclass(slots=True, eq=False)
class _Existing:
    index: int
    state: StateNode
    name: str
    hostname: str
    labels: Mapping[str, str]
    taints: tuple[TaintValue, ...]
    avail: tuple[int, ...]
    pool: str | None
    label_ok: dict[int, bool] = field(default_factory=dict)
    taint_ok: dict[int, bool] = field(default_factory=dict)

    def domain(self, key: str) -> str | None:
        if key == wk.HOSTNAME:
            return self.hostname
        return self.labels.get(key)


@dataclass(slots=True, eq=False)
class _New:
    index: int
    hostname: str
    pool: _Pool
    reqs: rq.Reqs
    options: list[tuple[float, _Type, Offering]]
    maxvec: tuple[int, ...]
    total: tuple[int, ...]
    cursor: int
    pods: list[Pod] = field(default_factory=list)
    absorbed: dict[int, tuple[rq.Reqs, list[tuple[float, _Type, Offering]]] | None] = field(
        default_factory=dict
    )
    reserved: tuple[int, ...] = ()

    @property
    def price(self) -> float:
        return self.options[self.cursor][0]

    def domain(self, key: str) -> str | None:
        if key == wk.HOSTNAME:
            return self.hostname
        return self.reqs.get(key).single


def _diverse(
    options: list[tuple[float, _Type, Offering]], min_values: Sequence[tuple[str, int]], limit: int
) -> list[tuple[float, _Type, Offering]]:
    """At most `limit` options, cheapest first, that still span `minValues` distinct values per key: the
    cheapest option of each value is taken first, until each key has enough, then the rest by price."""
    chosen: dict[str, tuple[float, _Type, Offering]] = {}
    for key, wanted in min_values:
        have = {_value_of(o[1], o[2], key) for o in chosen.values()}
        for opt in options:
            if len(have) >= wanted:
                break
            value = _value_of(opt[1], opt[2], key)
            if value is not None and value not in have:
                have.add(value)
                chosen.setdefault(opt[1].it.name, opt)
    for opt in options:
        if len(chosen) >= limit:
            break
        chosen.setdefault(opt[1].it.name, opt)
    return sorted(chosen.values(), key=lambda x: (x[0], x[1].it.name))[:limit]


def _maxvec(options: Sequence[tuple[float, _Type, Offering]], dims: int) -> tuple[int, ...]:
    out = [0] * dims
    for _, t, _ in options:
        for i, a in enumerate(t.alloc):
            if a > out[i]:
                out[i] = a
    return tuple(out)


# ------------------------------------------------------------------------------------------- the solver


class _Solver:
    def __init__(
        self,
        pods: Sequence[Pod],
        snapshot: Snapshot,
        pools: Sequence[NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
        daemonsets: Sequence[DaemonSet],
        options: SolveOptions,
    ) -> None:
        self.options = options
        self.snapshot = snapshot
        self.daemonsets = list(daemonsets)
        names: set[str] = {quantities.CPU, quantities.MEMORY, quantities.PODS}
        for pod in pods:
            names.update(pod.requests)
        for ds in self.daemonsets:
            names.update(ds.pod.requests)
        for pool in pools:
            names.update(n for n in pool.spec.limits_base_units() if n != "nodes")
        head = [quantities.CPU, quantities.MEMORY, quantities.PODS]
        self.dims: list[str] = head + sorted(names - set(head))
        self.dim_index = {n: i for i, n in enumerate(self.dims)}
        self.zero = (0,) * len(self.dims)
        self.pools: list[_Pool] = [
            self._prepare_pool(i, p, instance_types.get(p.name, ()))
            for i, p in enumerate(sorted(pools, key=lambda p: (-p.weight, p.name)))
        ]
        self.pool_by_name = {p.name: p for p in self.pools}
        self.existing: list[_Existing] = []
        self.new: list[_New] = []
        self.new_count: dict[str, int] = {}
        self.groups: dict[tuple, _Group] = {}
        self.owners: dict[tuple, _Group] = {}
        self.shapes: dict[tuple, _Shape] = {}
        self.variant_count = 0
        self._opts_cache: dict[tuple[int, rq.Reqs], list[tuple[float, _Type, Offering]]] = {}
        self._maxvecs: dict[int, tuple[int, ...]] = {}
        self._universe_cache: dict[tuple, frozenset[str]] = {}
        self._prepare_existing()

    # ---- preparation

    def vec(self, resources: Mapping[str, int]) -> tuple[int, ...]:
        idx = self.dim_index
        out = [0] * len(self.dims)
        for name, amount in resources.items():
            i = idx.get(name)
            if i is not None:
                out[i] = amount
        return tuple(out)

    def _ds_runs_on(self, ds: DaemonSet, labels: Mapping[str, str], taints: Sequence[TaintValue]) -> bool:
        pod = ds.pod
        if tolerates_all(pod.tolerations, tuple(taints)) is not None:
            return False
        alts = rq.pod_alternatives(pod.node_selector, pod.required_node_terms)
        return any(alt.matches(labels) for alt in alts)

    def _ds_runs_on_pool(self, ds: DaemonSet, pool_reqs: rq.Reqs, it: InstanceType, taints) -> bool:
        pod = ds.pod
        if tolerates_all(pod.tolerations, tuple(taints)) is not None:
            return False
        for alt in rq.pod_alternatives(pod.node_selector, pod.required_node_terms):
            merged = pool_reqs.intersect(alt)
            if merged.conflict() is None and _labels_ok(it, merged) and _any_offering(it, merged):
                return True
        return False

    def _prepare_pool(self, index: int, pool: NodePool, types: Sequence[InstanceType]) -> _Pool:
        spec = pool.spec.template.spec
        tmpl_labels = {**pool.spec.template.metadata.labels, wk.NODEPOOL: pool.name}
        reqs = rq.from_api(spec.requirements).intersect(rq.from_labels(tmpl_labels))
        taints = tuple(TaintValue(key=t.key, effect=t.effect.value, value=t.value) for t in spec.taints)
        compiled: list[_Type] = []
        pods_dim = self.dim_index[quantities.PODS]
        for it in types:
            if not _labels_ok(it, reqs) or not _any_offering(it, reqs):
                continue
            cap = list(self.vec(it.capacity))
            alloc = list(self.vec(it.allocatable))
            if quantities.PODS not in it.capacity:
                cap[pods_dim] = alloc[pods_dim] = it.max_pods
            overhead = self.zero
            for ds in self.daemonsets:
                if self._ds_runs_on_pool(ds, reqs, it, taints):
                    overhead = tuple(map(_add, overhead, self.vec(ds.pod.requests)))
            compiled.append(
                _Type(
                    it=it,
                    alloc=tuple(map(_sub, alloc, overhead)),
                    capacity=tuple(cap),
                    ds_overhead=overhead,
                )
            )
        compiled.sort(key=lambda t: t.it.name)
        limits: dict[int, int] = {}
        for name, amount in pool.spec.limits_base_units().items():
            if name == "nodes":
                limits[-1] = amount
            elif name in self.dim_index:
                limits[self.dim_index[name]] = amount
        return _Pool(
            index=index,
            pool=pool,
            name=pool.name,
            reqs=reqs,
            label_keys=frozenset(tmpl_labels),
            taints=taints,
            types=compiled,
            limits=limits,
            used={k: 0 for k in limits},
            declared_types=len(types),
            min_values=tuple((r.key, r.min_values) for r in spec.requirements if r.min_values),
        )

    def _requested(self, sn: StateNode) -> tuple[int, ...]:
        """What the node's running pods request, as a vector. StateNodes are frozen and the disruption
        planner re-solves over the same ones many times, so the sums are memoised per StateNode."""
        found = _REQUESTED.get(id(sn))
        if found is None or found[0] is not sn:
            sums: dict[str, int] = {}
            for pod in sn.pods:
                if pod.phase in ("Succeeded", "Failed"):
                    continue
                for name, amount in pod.requests.items():
                    sums[name] = sums.get(name, 0) + amount
            if len(_REQUESTED) >= _REQUESTED_MAX:
                _REQUESTED.clear()
            # Holding the StateNode keeps its id from being reused while the entry lives.
            found = _REQUESTED[id(sn)] = (sn, sums)
        return self.vec(found[1])

    def _starting(
        self, sn: StateNode, taints: Sequence[TaintValue], alloc: tuple[int, ...]
    ) -> tuple[tuple[TaintValue, ...], tuple[int, ...]]:
        """A node that registered but is not initialized yet still carries its start-up taints and the
        unregistered taint, and its device plugins may not report GPUs yet: pods need not tolerate those
        taints, and it offers what its claim promised (both clear once it is initialized)."""
        assert sn.claim is not None
        startup = {(t.key, t.effect.value) for t in sn.claim.spec.startup_taints}
        kept = tuple(t for t in taints if (t.key, t.effect) not in startup and t.key != wk.UNREGISTERED_TAINT)
        promised: tuple[int, ...] | None = None
        if sn.claim.status.allocatable:
            promised = self.vec(quantities.parse_resource_list(sn.claim.status.allocatable))
        else:
            t = self._claim_type(sn)
            promised = t.alloc if t is not None else None
        if promised is not None:
            alloc = tuple(map(max, alloc, promised))
        return kept, alloc

    def _capacity_of(self, sn: StateNode) -> tuple[int, ...]:
        if sn.node is not None and sn.node.capacity:
            return self.vec(sn.node.capacity)
        if sn.claim is not None and sn.claim.status.capacity:
            return self.vec(quantities.parse_resource_list(sn.claim.status.capacity))
        t = self._claim_type(sn)
        return t.capacity if t is not None else self.vec(sn.allocatable)

    def _claim_type(self, sn: StateNode) -> _Type | None:
        """The instance type a claim in flight will most likely be (its chosen type, else its first option)."""
        if sn.claim is None:
            return None
        pool = self.pool_by_name.get(sn.claim.nodepool or "")
        if pool is None:
            return None
        wanted = sn.claim.status.instance_type or next(iter(sn.claim.instance_type_options()), None)
        return next((t for t in pool.types if t.it.name == wanted), None)

    def _prepare_existing(self) -> None:
        ready: list[StateNode] = []
        flight: list[StateNode] = []
        for sn in self.snapshot.nodes:
            # Every node of a pool counts toward its limits while it exists, cordoned or deleting too:
            # counting it out early could let this solve launch past the limit.
            pool = self.pool_by_name.get(sn.nodepool or "")
            if pool is not None and pool.limits:
                cap = self._capacity_of(sn)
                for dim in pool.limits:
                    pool.used[dim] += 1 if dim == -1 else cap[dim]
            if sn.deleting or sn.cordoned:
                continue
            (flight if sn.in_flight else ready).append(sn)
        for sn in sorted(ready, key=lambda n: n.name) + sorted(flight, key=lambda n: n.name):
            labels = dict(sn.labels)
            taints = sn.taints
            alloc_map = sn.allocatable
            if not alloc_map:
                t = self._claim_type(sn)
                alloc = t.alloc if t is not None else self.zero
            else:
                alloc = self.vec(alloc_map)
                if quantities.PODS not in alloc_map:
                    alloc = tuple(
                        110 if i == self.dim_index[quantities.PODS] else a for i, a in enumerate(alloc)
                    )
                if sn.in_flight:
                    # No daemonset pod runs on a claim in flight yet: keep room for them.
                    for ds in self.daemonsets:
                        if self._ds_runs_on(ds, labels, taints):
                            alloc = tuple(map(_sub, alloc, self.vec(ds.pod.requests)))
            if sn.in_flight and not alloc_map and self._claim_type(sn) is None:
                continue
            if sn.node is not None and sn.claim is not None and not sn.initialized:
                taints, alloc = self._starting(sn, taints, alloc)
            avail = tuple(map(_sub, alloc, self._requested(sn)))
            pool = sn.nodepool
            self.existing.append(
                _Existing(
                    index=len(self.existing),
                    state=sn,
                    name=sn.name,
                    hostname=labels.get(wk.HOSTNAME, sn.name),
                    labels=labels,
                    taints=tuple(taints),
                    avail=avail,
                    pool=pool,
                )
            )

    # ---- shapes, variants and topology groups

    def _namespaces(self, pod: Pod, term: PodAffinityTerm) -> frozenset[str] | None:
        if term.namespace_selector is not None:
            sel = term.namespace_selector
            if not sel.match_labels and not sel.match_expressions:
                return None
            chosen = {ns for ns, labels in self.snapshot.namespaces.items() if sel.matches(labels)}
            return frozenset(chosen | set(term.namespaces))
        return frozenset(term.namespaces or (pod.namespace,))

    def _group(self, table: dict[tuple, _Group], key: str, selector, namespaces) -> _Group:
        k = (key, selector, namespaces)
        g = table.get(k)
        if g is None:
            g = table[k] = _Group(key=key, selector=selector, namespaces=namespaces)
        return g

    def _shape_key(self, pod: Pod) -> tuple:
        return (
            pod.namespace,
            tuple(sorted(pod.labels.items())),
            tuple(sorted(pod.requests.items())),
            tuple(sorted(pod.node_selector.items())),
            pod.required_node_terms,
            pod.preferred_node_terms,
            pod.tolerations,
            pod.topology_spread,
            pod.affinity_required,
            pod.affinity_preferred,
            pod.anti_affinity_required,
            pod.anti_affinity_preferred,
            pod.annotations.get(wk.NODEPOOLS, ""),
        )

    def _spread_selector(self, pod: Pod, c) -> LabelSelector | None:
        sel = c.label_selector
        if c.match_label_keys and sel is not None:
            extra = tuple((k, pod.labels[k]) for k in c.match_label_keys if k in pod.labels)
            sel = LabelSelector(tuple(sorted(set(sel.match_labels) | set(extra))), sel.match_expressions)
        return sel

    def _compile(self, pod: Pod) -> _Shape:
        alts = rq.pod_alternatives(pod.node_selector, pod.required_node_terms)
        requested = pod.nodepools
        if requested:
            pools = tuple(self.pool_by_name[n] for n in requested if n in self.pool_by_name)
            missing = tuple(n for n in requested if n not in self.pool_by_name)
            names: frozenset[str] | None = frozenset(requested)
        else:
            pools, missing, names = tuple(self.pools), (), None
        req = self.vec(pod.requests)
        prefs = [
            rq.from_selector(t.requirements)
            for t in sorted(pod.preferred_node_terms, key=lambda t: -t.weight)
            if t.requirements
        ]
        soft = bool(
            pod.affinity_preferred
            or pod.anti_affinity_preferred
            or any(c.when_unsatisfiable != "DoNotSchedule" for c in pod.topology_spread)
        )
        plans: list[tuple[rq.Reqs | None, bool]] = [(p, soft) for p in prefs] + [(None, soft)]
        if soft:
            plans.append((None, False))
        variants: list[_Variant] = []
        for pref, with_soft in plans:
            spreads = [
                _Spread(
                    group=self._group(
                        self.groups,
                        c.topology_key,
                        self._spread_selector(pod, c),
                        frozenset((pod.namespace,)),
                    ),
                    max_skew=max(1, c.max_skew),
                    hard=c.when_unsatisfiable == "DoNotSchedule",
                )
                for c in pod.topology_spread
                if c.when_unsatisfiable == "DoNotSchedule" or with_soft
            ]
            aff_terms = list(pod.affinity_required) + (list(pod.affinity_preferred) if with_soft else [])
            affinity = []
            for t in aff_terms:
                ns = self._namespaces(pod, t)
                g = self._group(self.groups, t.topology_key, t.label_selector, ns)
                affinity.append((g, g.matches(pod)))
            anti_terms = list(pod.anti_affinity_required) + (
                list(pod.anti_affinity_preferred) if with_soft else []
            )
            anti = [
                self._group(self.groups, t.topology_key, t.label_selector, self._namespaces(pod, t))
                for t in anti_terms
            ]
            owner_of = [
                self._group(self.owners, t.topology_key, t.label_selector, self._namespaces(pod, t))
                for t in pod.anti_affinity_required
            ]
            v_alts = alts if pref is None else tuple(a.intersect(pref) for a in alts)
            v = _Variant(
                id=self.variant_count,
                alts=v_alts,
                tolerations=pod.tolerations,
                req=req,
                pools=pools,
                missing_pools=missing,
                pool_names=names,
                order=tuple(dict.fromkeys(requested)) if requested else tuple(p.name for p in pools),
                spreads=spreads,
                affinity=affinity,
                anti=anti,
                owner_of=owner_of,
            )
            self.variant_count += 1
            v.monotone = not affinity and all(s.group.key == wk.HOSTNAME for s in spreads)
            variants.append(v)
        return _Shape(labels=pod.labels, namespace=pod.namespace, variants=variants)

    def _link_groups(self, shape: _Shape, pod: Pod) -> None:
        """After every group exists: which groups count this shape, which anti-affinity owners block it."""
        member_of = [g for g in self.groups.values() if g.matches(pod)]
        blocked_by = [g for g in self.owners.values() if g.matches(pod)]
        for v in shape.variants:
            v.member_of = member_of
            v.blocked_by = blocked_by
            v.has_topology = bool(v.spreads or v.affinity or v.anti or blocked_by)
            blockers: list[tuple[_Group, int]] = [(g, 1) for g in v.anti if g.key == wk.HOSTNAME]
            blockers += [(g, 1) for g in blocked_by if g.key == wk.HOSTNAME]
            blockers += [(s.group, s.max_skew) for s in v.spreads if s.group.key == wk.HOSTNAME]
            v.host_blockers = blockers

    # ---- per pool verdicts

    def pool_fit(self, v: _Variant, pool: _Pool) -> _PoolFit | str:
        """The variant against the pool alone (cached): a fit, or why not in plain words."""
        cached = v.pool_fit.get(pool.index)
        if cached is not None:
            return cached
        result = self._pool_fit(v, pool)
        v.pool_fit[pool.index] = result
        return result

    def _pool_fit(self, v: _Variant, pool: _Pool) -> _PoolFit | str:
        taint = tolerates_all(v.tolerations, pool.taints)
        if taint is not None:
            return f"taint {_fmt_taint(taint)} is not tolerated"
        if not pool.types:
            if pool.declared_types == 0:
                return "its NodeClass offers no instance types"
            return f"no instance type of its NodeClass meets the pool's requirements ({pool.reqs.describe()})"
        reasons: list[str] = []
        best: _PoolFit | None = None
        for alt in v.alts:
            result = self._alt_fit(v, pool, alt)
            if isinstance(result, str):
                reasons.append(result)
                continue
            if best is None or result.standalone < best.standalone:
                best = result
        if best is not None:
            return best
        return reasons[0] if len(set(reasons)) == 1 else " or ".join(dict.fromkeys(reasons))

    def _alt_fit(self, v: _Variant, pool: _Pool, alt: rq.Reqs) -> _PoolFit | str:
        merged = pool.reqs.intersect(alt)
        key = merged.conflict()
        if key is not None:
            return (
                f"requirement {key} {alt.get(key).describe()} conflicts with the pool's "
                f"{key} {pool.reqs.get(key).describe()}"
            )
        for key, req in alt.items:
            if key in pool.label_keys or key in _TYPE_KEYS or key in _OFFERING_KEYS:
                continue
            if not req.matches(None):
                return f"requirement {key} {req.describe()}: the pool's nodes do not carry label {key}"
        options = self._options_for(pool, merged)
        req = v.req
        for price, t, _ in options:
            if all(map(_le, req, t.alloc)):
                if pool.min_values:
                    short = _short_of_min_values(pool, [o for o in options if all(map(_le, req, o[1].alloc))])
                    if short is not None:
                        return short
                return _PoolFit(reqs=merged, options=options, standalone=price)
        matching = [t for t in pool.types if _labels_ok(t.it, merged) and _any_offering(t.it, merged)]
        if not matching:
            for key, kreq in alt.items:
                if key in _TYPE_KEYS or key in _OFFERING_KEYS:
                    single = rq.Reqs(((key, kreq),))
                    if not any(_labels_ok(t.it, single) and _any_offering(t.it, single) for t in pool.types):
                        if key == wk.ZONE:
                            offered = sorted({o.zone for t in pool.types for o in t.it.offerings})
                        elif key == wk.CAPACITY_TYPE:
                            offered = sorted({o.capacity_type for t in pool.types for o in t.it.offerings})
                        else:
                            offered = sorted({t.it.labels.get(key, "") for t in pool.types} - {""})
                        if not offered:
                            return f"no instance type of the pool carries {key} (wanted {kreq.describe()})"
                        shown = ", ".join(offered[:8]) + (", ..." if len(offered) > 8 else "")
                        return f"no instance type has {key} {kreq.describe()} (the pool offers: {shown})"
            return f"no instance type meets the requirements {alt.describe()}"
        fitting = [t for t in matching if all(map(_le, req, t.alloc))]
        if not fitting:
            short = [i for i, a in enumerate(req) if a > max(t.alloc[i] for t in matching)]
            if short:
                largest = max(matching, key=lambda t: (tuple(t.alloc[i] for i in short), t.it.name))
            else:
                largest = max(matching, key=lambda t: (t.alloc, t.it.name))
                short = [i for i, a in enumerate(req) if a > largest.alloc[i]]
            have = ", ".join(f"{self.dims[i]} {_fmt(self.dims[i], largest.alloc[i])}" for i in short)
            wanted = _fmt_list(
                self.dims, tuple(0 if self.dims[i] == quantities.PODS else a for i, a in enumerate(req))
            )
            return (
                f"no instance type is big enough for {wanted}; the largest is "
                f"{largest.it.name} with {have} allocatable"
            )
        zreq, creq = merged.get(wk.ZONE), merged.get(wk.CAPACITY_TYPE)
        gone = sorted(
            f"{t.it.name} {o.capacity_type} {o.zone}"
            for t in fitting
            for o in t.it.offerings
            if zreq.matches(o.zone) and creq.matches(o.capacity_type)
        )
        shown = ", ".join(gone[:6]) + (f" and {len(gone) - 6} more" if len(gone) > 6 else "")
        return f"every offering of the {len(fitting)} instance types that fit is unavailable ({shown})"

    def _options_for(self, pool: _Pool, reqs: rq.Reqs) -> list[tuple[float, _Type, Offering]]:
        """The pool's types meeting `reqs` with an available offering they allow, cheapest first (cached:
        pods and nodes with equal requirements share one list)."""
        key = (pool.index, reqs)
        cached = self._opts_cache.get(key)
        if cached is not None:
            return cached
        out = []
        for t in pool.types:
            if not _labels_ok(t.it, reqs):
                continue
            o = _cheapest_offering(t.it, reqs)
            if o is not None:
                out.append((o.price, t, o))
        out.sort(key=lambda x: (x[0], x[1].it.name))
        self._opts_cache[key] = out
        self._maxvecs[id(out)] = _maxvec(out, len(self.dims))
        return out

    # ---- topology

    def _universe(self, v: _Variant, key: str) -> frozenset[str]:
        """The domains of `key` a pod of this variant could land in (for the minimum of a spread)."""
        cached = v.universe.get(key)
        if cached is not None:
            return cached
        fits = [(pool, self.pool_fit(v, pool)) for pool in v.pools]
        shared_key = (key, v.alts, tuple(pool.index for pool, fit in fits if not isinstance(fit, str)))
        shared = self._universe_cache.get(shared_key)
        if shared is not None:
            v.universe[key] = shared
            return shared
        out: set[str] = set()
        for _pool, fit in fits:
            if isinstance(fit, str):
                continue
            kreq = fit.reqs.get(key)
            for _, t, _ in fit.options:
                if key == wk.ZONE:
                    vals = {o.zone for o in t.it.offerings if o.available}
                elif key == wk.CAPACITY_TYPE:
                    vals = {o.capacity_type for o in t.it.offerings if o.available}
                elif key in t.it.labels:
                    vals = {t.it.labels[key]}
                else:
                    single = kreq.single
                    vals = {single} if single else set()
                out.update(x for x in vals if kreq.matches(x))
        for n in self.existing:
            value = n.domain(key)
            if value is not None and any(alt.matches(n.labels) for alt in v.alts):
                out.add(value)
        result = frozenset(out)
        v.universe[key] = result
        self._universe_cache[shared_key] = result
        return result

    def _domain_ok(self, v: _Variant, key: str, domain: str) -> bool:
        for s in v.spreads:
            g = s.group
            if g.key != key:
                continue
            if key == wk.HOSTNAME:
                # A new node can always be opened: the emptiest hostname holds none.
                if g.counts.get(domain, 0) + 1 > s.max_skew:
                    return False
                continue
            universe = self._universe(v, key)
            if domain not in universe:
                return False
            counts = g.counts
            low = min((counts.get(d, 0) for d in universe), default=0)
            if counts.get(domain, 0) + 1 - low > s.max_skew:
                return False
        for g, self_match in v.affinity:
            if g.key == key and not (g.counts.get(domain, 0) > 0 or (g.total == 0 and self_match)):
                return False
        for g in v.anti:
            if g.key == key and g.counts.get(domain, 0) > 0:
                return False
        return all(not (g.key == key and g.counts.get(domain, 0) > 0) for g in v.blocked_by)

    def _topology_keys(self, v: _Variant) -> list[str]:
        keys = [s.group.key for s in v.spreads]
        keys += [g.key for g, _ in v.affinity]
        keys += [g.key for g in v.anti]
        keys += [g.key for g in v.blocked_by]
        return sorted(set(keys))

    def _check_existing_topology(self, v: _Variant, n: _Existing) -> bool:
        for key in self._topology_keys(v):
            domain = n.domain(key)
            if domain is None:
                # A node without the key is outside every domain: spreads and affinity cannot use it.
                if any(s.group.key == key for s in v.spreads) or any(g.key == key for g, _ in v.affinity):
                    return False
                continue
            if not self._domain_ok(v, key, domain):
                return False
        return True

    def _candidates(self, node_reqs: rq.Reqs, options, key: str) -> list[str]:
        kreq = node_reqs.get(key)
        if key == wk.ZONE or key == wk.CAPACITY_TYPE:
            vals = {
                o.zone if key == wk.ZONE else o.capacity_type for _, t, _ in options for o in t.it.offerings
            }
        else:
            vals = {t.it.labels[key] for _, t, _ in options if key in t.it.labels}
            if kreq.allowed is not None:
                vals |= kreq.allowed
        return sorted(x for x in vals if kreq.matches(x))

    def _pin(
        self, v: _Variant, pool: _Pool, node_reqs: rq.Reqs, options, hostname: str, total: tuple[int, ...]
    ) -> tuple[rq.Reqs, list[tuple[float, _Type, Offering]]] | None:
        """Choose a domain for every topology key of the variant on a new node; narrow its requirements
        and options accordingly. None when no domain works."""
        for key in self._topology_keys(v):
            if key == wk.HOSTNAME:
                if not self._domain_ok(v, key, hostname):
                    return None
                continue
            single = node_reqs.get(key).single
            cands = [single] if single is not None else self._candidates(node_reqs, options, key)
            ok = [d for d in cands if self._domain_ok(v, key, d)]
            if not ok:
                return None
            if single is not None:
                continue
            spread = next((s for s in v.spreads if s.group.key == key), None)
            ranked = []
            for d in ok:
                narrowed = node_reqs.intersect(rq.Reqs(((key, rq.KeyReq(frozenset({d}), absent_ok=False)),)))
                opts = self._options_for(pool, narrowed)
                if opts:
                    # Emptiest domain first (the spread wants it), then the cheapest that holds the
                    # node's pods, then by name.
                    count = spread.group.counts.get(d, 0) if spread is not None else 0
                    price = next((o[0] for o in opts if all(map(_le, total, o[1].alloc))), INF)
                    ranked.append((count, price, d, narrowed, opts))
            if not ranked:
                return None
            _, _, _, narrowed, opts = min(ranked, key=lambda r: r[:3])
            pinned = (narrowed, opts)
            node_reqs, options = pinned
        return node_reqs, options

    def _record(self, v: _Variant, domain_of) -> None:
        for g in v.member_of:
            d = domain_of(g.key)
            if d is not None:
                g.add(d)
        for g in v.owner_of:
            d = domain_of(g.key)
            if d is not None:
                g.add(d)

    # ---- limits

    def _limit_room(self, pool: _Pool, reserved: tuple[int, ...]) -> dict[int, int]:
        return {
            dim: limit
            - pool.used[dim]
            + ((1 if reserved else 0) if dim == -1 else (reserved[dim] if reserved else 0))
            for dim, limit in pool.limits.items()
        }

    @staticmethod
    def _within(t: _Type, room: dict[int, int]) -> bool:
        for dim, r in room.items():
            if dim == -1:
                if r < 1:
                    return False
            elif t.capacity[dim] > r:
                return False
        return True

    def _reserve(self, pool: _Pool, old: tuple[int, ...], new: tuple[int, ...]) -> None:
        for dim in pool.limits:
            if dim == -1:
                pool.used[dim] += 0 if old else 1
            else:
                pool.used[dim] += new[dim] - (old[dim] if old else 0)

    # ---- placing

    def _try_existing(self, v: _Variant, pod: Pod) -> _Existing | None:
        req = v.req
        nodes = self.existing
        start = v.hint_existing if v.monotone else 0
        for i in range(start, len(nodes)):
            n = nodes[i]
            if not all(map(_le, req, n.avail)):
                continue
            if v.pool_names is not None and n.pool not in v.pool_names:
                continue
            ok = n.taint_ok.get(v.id)
            if ok is None:
                ok = n.taint_ok[v.id] = tolerates_all(v.tolerations, n.taints) is None
            if not ok:
                continue
            ok = n.label_ok.get(v.id)
            if ok is None:
                ok = n.label_ok[v.id] = any(alt.matches(n.labels) for alt in v.alts)
            if not ok:
                continue
            if v.has_topology and not self._check_existing_topology(v, n):
                continue
            if v.monotone:
                v.hint_existing = i
            n.avail = tuple(map(_sub, n.avail, req))
            self._record(v, n.domain)
            return n
        if v.monotone:
            v.hint_existing = len(nodes)
        return None

    def _narrow(self, v: _Variant, n: _New):
        """The node's requirements and options once the variant's requirements join it (cached)."""
        if v.id in n.absorbed:
            return n.absorbed[v.id]
        result = None
        for alt in v.alts:
            merged = n.reqs.intersect(alt)
            if merged.conflict() is not None:
                continue
            if merged == n.reqs:
                result = (n.reqs, n.options)
                break
            ok = True
            for key, req in alt.items:
                if key in n.pool.label_keys or key in _TYPE_KEYS or key in _OFFERING_KEYS:
                    continue
                if not req.matches(None):
                    ok = False
            if not ok:
                continue
            opts = self._options_for(n.pool, merged)
            if opts:
                result = (merged, opts)
                break
        n.absorbed[v.id] = result
        return result

    def _fit_options(self, options, total, start: int, room: dict[int, int] | None) -> int:
        for i in range(start, len(options)):
            t = options[i][1]
            if all(map(_le, total, t.alloc)) and (room is None or self._within(t, room)):
                return i
        return -1

    def _try_new_nodes(self, v: _Variant, pod: Pod, *, cost_aware: bool = True) -> _New | None:
        nodes = self.new
        cost_aware = cost_aware and self.options.cost_aware_packing
        start = v.hint_new if v.monotone and cost_aware else 0
        for g, threshold in v.host_blockers:
            # Nodes are opened in order, and a hostname group blocks a node for good once it holds
            # `threshold` counted pods: skip the prefix every such group already blocks.
            p = g.pointers.get(threshold, 0)
            counts = g.counts
            while p < len(nodes) and counts.get(nodes[p].hostname, 0) >= threshold:
                p += 1
            g.pointers[threshold] = p
            start = max(start, p)
        req = v.req
        pool_names = v.pool_names
        for i in range(start, len(nodes)):
            n = nodes[i]
            pool = n.pool
            if pool_names is not None and pool.name not in pool_names:
                continue
            total = tuple(map(_add, n.total, req))
            if not all(map(_le, total, n.maxvec)):
                continue
            fit = self.pool_fit(v, pool)
            if isinstance(fit, str):
                continue
            narrowed = self._narrow(v, n)
            if narrowed is None:
                continue
            node_reqs, options = narrowed
            if v.has_topology:
                pinned = self._pin(v, n.pool, node_reqs, options, n.hostname, total)
                if pinned is None:
                    continue
                node_reqs, options = pinned
            changed = options is not n.options
            room = self._limit_room(pool, n.reserved) if pool.limits else None
            idx = self._fit_options(options, total, 0 if changed else n.cursor, room)
            if idx < 0:
                continue
            price = options[idx][0]
            if cost_aware and price - n.price > fit.standalone + 1e-9:
                continue
            if pool.min_values and _short_of_min_values(
                pool, [o for o in options[idx:] if all(map(_le, total, o[1].alloc))]
            ):
                continue
            if v.monotone and cost_aware:
                v.hint_new = i
            t = options[idx][1]
            if pool.limits:
                self._reserve(pool, n.reserved, t.capacity)
            n.reserved = t.capacity
            if changed:
                n.reqs, n.options = node_reqs, options
                n.maxvec = self._maxvecs[id(options)]
                n.absorbed = {}
            n.cursor = idx
            n.total = total
            n.pods.append(pod)
            self._record(v, n.domain)
            return n
        if v.monotone and cost_aware:
            v.hint_new = len(nodes)
        return None

    def _open(self, v: _Variant, pool: _Pool, pod: Pod) -> _New | str:
        fit = self.pool_fit(v, pool)
        if isinstance(fit, str):
            return fit
        name = self._next_name(pool, commit=False)
        node_reqs, options = fit.reqs, fit.options
        if v.has_topology:
            pinned = self._pin(v, pool, node_reqs, options, name, v.req)
            if pinned is None:
                return self._topology_reason(v, pool, fit)
            node_reqs, options = pinned
        room = self._limit_room(pool, ()) if pool.limits else None
        idx = self._fit_options(options, v.req, 0, room)
        if idx < 0:
            if room is not None:
                return self._limit_reason(pool, options, v.req)
            return "no instance type fits"  # unreachable: pool_fit found one
        t = options[idx][1]
        if pool.limits:
            self._reserve(pool, (), t.capacity)
        self._next_name(pool, commit=True)
        n = _New(
            index=len(self.new),
            hostname=name,
            pool=pool,
            reqs=node_reqs,
            options=options,
            maxvec=self._maxvecs[id(options)],
            total=v.req,
            cursor=idx,
            pods=[pod],
            reserved=t.capacity,
        )
        self.new.append(n)
        self._record(v, n.domain)
        return n

    def _next_name(self, pool: _Pool, *, commit: bool) -> str:
        k = self.new_count.get(pool.name, 0) + 1
        if commit:
            self.new_count[pool.name] = k
        return f"{self.options.claim_name_prefix}{pool.name}-{k}"

    def _limit_reason(self, pool: _Pool, options, req: tuple[int, ...]) -> str:
        t = next((o[1] for o in options if all(map(_le, req, o[1].alloc))), options[0][1])
        parts = []
        for dim, limit in pool.limits.items():
            if dim == -1:
                if pool.used[dim] + 1 > limit:
                    parts.append(f"limit nodes={limit} reached: {pool.used[dim]} nodes already")
                continue
            name = self.dims[dim]
            if pool.used[dim] + t.capacity[dim] > limit:
                parts.append(
                    f"limit {name}={_fmt(name, limit)} would be exceeded: {_fmt(name, pool.used[dim])} in use "
                    f"and the cheapest type that fits ({t.it.name}) adds {_fmt(name, t.capacity[dim])}"
                )
        return "; ".join(parts) or "the pool's limits leave no room for a type that fits"

    def _topology_reason(self, v: _Variant, pool: _Pool, fit: _PoolFit) -> str:
        parts = []
        for s in v.spreads:
            g = s.group
            counts = ", ".join(f"{d}={c}" for d, c in sorted(g.counts.items())) or "none yet"
            parts.append(
                f"topology spread on {g.key} (maxSkew {s.max_skew}) cannot be kept (counts: {counts})"
            )
        for g, _ in v.affinity:
            parts.append(f"pod affinity on {g.key}: no matching pod in a domain this pool offers")
        for g in v.anti:
            parts.append(f"pod anti-affinity on {g.key}: every domain this pool offers holds a matching pod")
        for g in v.blocked_by:
            parts.append(f"another pod's anti-affinity on {g.key} excludes this pod from the domains left")
        return "; ".join(parts) or "topology constraints cannot be met"

    def place(self, pod: Pod, shape: _Shape) -> tuple[str, object] | list[PoolReason]:
        reasons: list[PoolReason] = []
        for v in shape.variants:
            existing = self._try_existing(v, pod)
            if existing is not None:
                return ("existing", existing)
            node = self._try_new_nodes(v, pod)
            if node is not None:
                return ("new", node)
            why = {name: f"NodePool {name} does not exist" for name in v.missing_pools}
            for pool in v.pools:
                opened = self._open(v, pool, pod)
                if isinstance(opened, str):
                    why[pool.name] = opened
                    continue
                return ("new", opened)
            reasons = [PoolReason(name, why[name]) for name in v.order if name in why]
            if self.options.cost_aware_packing:
                # No pool can open a node (limits, topology): a dearer open node beats none.
                node = self._try_new_nodes(v, pod, cost_aware=False)
                if node is not None:
                    return ("new", node)
        if not reasons:
            reasons = [PoolReason("", "no NodePool exists")]
        return reasons

    # ---- the solve

    def solve(self, pods: Sequence[Pod]) -> Results:
        by_key: dict[tuple, _Shape] = {}
        pod_shapes: list[tuple[Pod, _Shape]] = []
        firsts: list[tuple[_Shape, Pod]] = []
        for pod in pods:
            key = self._shape_key(pod)
            shape = by_key.get(key)
            if shape is None:
                shape = by_key[key] = self._compile(pod)
                firsts.append((shape, pod))
            pod_shapes.append((pod, shape))
        # Existing pods with required anti-affinity block the pods they select.
        bound = [p for n in self.existing for p in _anti_affine(n.state)]
        for p in bound:
            for t in p.anti_affinity_required:
                self._group(self.owners, t.topology_key, t.label_selector, self._namespaces(p, t))
        for shape, pod in firsts:
            self._link_groups(shape, pod)
        groups = list(self.groups.values()) + list(self.owners.values())
        if groups:
            # Running pods repeat a few label sets: match each set against the groups once.
            matched: dict[tuple, list[_Group]] = {}
            all_groups = list(self.groups.values())
            for n in self.existing:
                for p in n.state.pods:
                    if p.is_terminal:
                        continue
                    key = (p.namespace, frozenset(p.labels.items()))
                    hits = matched.get(key)
                    if hits is None:
                        hits = matched[key] = [g for g in all_groups if g.matches(p)]
                    for g in hits:
                        d = n.domain(g.key)
                        if d is not None:
                            g.add(d)
                    for t in p.anti_affinity_required:
                        g = self.owners[(t.topology_key, t.label_selector, self._namespaces(p, t))]
                        d = n.domain(g.key)
                        if d is not None:
                            g.add(d)

        dim_gpu = self.dim_index.get(wk.GPU_RESOURCE)
        cpu, mem = self.dim_index[quantities.CPU], self.dim_index[quantities.MEMORY]

        def order(item: tuple[Pod, _Shape]):
            pod, shape = item
            r = shape.variants[0].req
            return (-pod.priority, -(r[dim_gpu] if dim_gpu is not None else 0), -r[cpu], -r[mem], pod.key)

        results = Results()
        for pod, shape in sorted(pod_shapes, key=order):
            outcome = self.place(pod, shape)
            if isinstance(outcome, list):
                results.unschedulable.append(Unschedulable(pod=pod, reasons=outcome))
            elif outcome[0] == "existing":
                node = outcome[1]
                assert isinstance(node, _Existing)
                results.placements.append(Placement(pod=pod, node=node.name))
        results.new_claims = [self._finalize(n) for n in self.new]
        return results

    def _finalize(self, n: _New) -> NewClaim:
        pool = n.pool
        room = None
        if pool.limits:
            room = self._limit_room(pool, n.reserved)
        # Options are sorted cheapest first and none before the cursor fits, so the chosen type leads.
        options = []
        limit = self.options.max_options
        total = n.total
        fitting = (
            opt
            for opt in n.options[n.cursor :]
            if all(map(_le, total, opt[1].alloc)) and (room is None or self._within(opt[1], room))
        )
        if pool.min_values:
            options = _diverse(list(fitting), pool.min_values, limit)
        else:
            for opt in fitting:
                options.append(opt)
                if len(options) >= limit:
                    break
        types = [t.it for _, t, _ in options]
        first = options[0][1]
        requirements = [r for r in n.reqs.to_requirements() if r.key not in (wk.INSTANCE_TYPE, wk.NODEPOOL)]
        requirements += rq.KeyReq(frozenset(it.name for it in types), absent_ok=False).to_requirements(
            wk.INSTANCE_TYPE
        )
        requirements[-1] = requirements[-1].model_copy(update={"values": [it.name for it in types]})
        requests: dict[str, int] = {}
        for pod in n.pods:
            requests = quantities.add(requests, pod.requests)
        for i, amount in enumerate(first.ds_overhead):
            if amount:
                requests[self.dims[i]] = requests.get(self.dims[i], 0) + amount
        return NewClaim(
            hostname=n.hostname,
            nodepool=pool.pool,
            requirements=requirements,
            instance_types=types,
            offering=options[0][2],
            pods=list(n.pods),
            requests=requests,
        )


def solve(
    pods: Sequence[Pod],
    snapshot: Snapshot,
    pools: Sequence[NodePool],
    instance_types: Mapping[str, Sequence[InstanceType]],
    daemonsets: Sequence[DaemonSet] | None = None,
    *,
    options: SolveOptions | None = None,
) -> Results:
    """Decide where every pod goes: existing capacity, a new NodeClaim, or nowhere (with reasons).

    `instance_types` maps a pool name to the types its NodeClass can launch (unavailable offerings
    flagged). `daemonsets` default to the snapshot's. Pods need not be pending in the snapshot: the
    disruption planner passes the pods of nodes it removed from the snapshot.
    """
    solver = _Solver(
        pods,
        snapshot,
        pools,
        instance_types,
        snapshot.daemonsets if daemonsets is None else daemonsets,
        options or SolveOptions(),
    )
    return solver.solve(pods)


@dataclass(frozen=True, slots=True)
class PoolVerdict:
    """One pool's answer for one pod on its own (what `provisioner explain` prints)."""

    nodepool: str
    fits: bool
    reason: str = ""
    """Why not, in plain words (empty when it fits)."""
    instance_type: InstanceType | None = None
    """The cheapest type that would hold the pod alone."""
    offering: Offering | None = None
    relaxed: bool = False
    """True when the pod fits only once its preferences are dropped."""

    @property
    def price(self) -> float | None:
        return self.offering.price if self.offering is not None else None


def explain(
    pod: Pod,
    snapshot: Snapshot,
    pools: Sequence[NodePool],
    instance_types: Mapping[str, Sequence[InstanceType]],
    daemonsets: Sequence[DaemonSet] | None = None,
) -> list[PoolVerdict]:
    """For one pod, each pool it may use, in the order the scheduler tries them: fits or not, why not,
    and the cheapest node that would hold it alone. Limits are counted over the snapshot's nodes."""
    solver = _Solver(
        [pod],
        snapshot,
        pools,
        instance_types,
        snapshot.daemonsets if daemonsets is None else daemonsets,
        SolveOptions(),
    )
    shape = solver._compile(pod)
    first = shape.variants[0]
    verdicts = {
        name: PoolVerdict(name, False, f"NodePool {name} does not exist") for name in first.missing_pools
    }
    for pool in first.pools:
        verdict: PoolVerdict | None = None
        for depth, v in enumerate(shape.variants):
            fit = solver.pool_fit(v, pool)
            if isinstance(fit, str):
                verdict = verdict if verdict is not None else PoolVerdict(pool.name, False, fit)
                continue
            room = solver._limit_room(pool, ()) if pool.limits else None
            idx = solver._fit_options(fit.options, v.req, 0, room)
            if idx < 0:
                verdict = PoolVerdict(pool.name, False, solver._limit_reason(pool, fit.options, v.req))
                continue
            _, t, offering = fit.options[idx]
            verdict = PoolVerdict(pool.name, True, "", t.it, offering, relaxed=depth > 0)
            break
        assert verdict is not None
        verdicts[pool.name] = verdict
    return [verdicts[name] for name in first.order if name in verdicts]
