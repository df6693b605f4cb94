"""NodePools compiled for one solve: their requirements and taints, the instance types they may launch
(allocatable after the daemonsets that would run there), and their limits: how much of each limited
resource is in use, the room left for a node, reserving it, and why a limit says no.

Pools are compiled in the order they are tried, `pool_order.by_weight` (weight descending, then name);
which pools a pod may use is `pool_order.resolve`'s."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from provisioner.api import NodePool, quantities
from provisioner.api import labels as wk
from provisioner.cloudprovider.types import InstanceType
from provisioner.scheduling import pool_order
from provisioner.scheduling import requirements as rq
from provisioner.scheduling.offerings import (
    OFFERING_KEYS,
    TYPE_KEYS,
    Option,
    PoolType,
    SharedOptions,
    any_offering,
    labels_ok,
)
from provisioner.scheduling.resources import Dims, Vec, fits, fmt, le, minus, plus
from provisioner.state.objects import DaemonSet, TaintValue, tolerates_all

NODES = -1
"""The limit dimension of the node count (the others are indices of the solve's `Dims`)."""


@dataclass(slots=True, eq=False)
class Pool:
    """A NodePool as one solve sees it."""

    index: int
    pool: NodePool
    name: str
    reqs: rq.Reqs
    label_keys: frozenset[str]
    taints: tuple[TaintValue, ...]
    types: list[PoolType]
    """Every type of the pool's NodeClass whose labels meet the pool's requirements (available or not)."""
    limits: dict[int, int]
    """Dimension index -> limit (capacity), for the resources the pool limits; NODES is the node count."""
    used: dict[int, int]
    declared_types: int = 0
    min_values: tuple[tuple[str, int], ...] = ()
    """Karpenter's `minValues`: (key, n) where a claim's options must span n distinct values of key."""
    custom_keys: tuple[str, ...] = ()
    """Label keys the pool's requirements define with `In` that neither the type nor the offering sets
    (`example.com/tier In [gold, silver]`): each node carries one of the values as a label."""


def daemonset_runs_on(ds: DaemonSet, labels: Mapping[str, str], taints: Sequence[TaintValue]) -> bool:
    """Whether the daemonset's pod would run on a node with these labels and taints."""
    pod = ds.pod
    if tolerates_all(pod.tolerations, tuple(taints)) is not None:
        return False
    alts = rq.pod_alternatives(pod.node_selector, pod.required_node_terms)
    return any(alt.matches(labels) for alt in alts)


def daemonset_may_run_on(ds: DaemonSet, reqs: rq.Reqs, taints: Sequence[TaintValue]) -> bool:
    """Whether the daemonset's pod may run on a node still to come whose labels meet `reqs` (a claim in
    flight): it tolerates the taints and its node constraints leave some node possible."""
    pod = ds.pod
    if tolerates_all(pod.tolerations, tuple(taints)) is not None:
        return False
    alts = rq.pod_alternatives(pod.node_selector, pod.required_node_terms)
    return any(reqs.intersect(alt).conflict() is None for alt in alts)


def _daemonset_runs_on_type(
    ds: DaemonSet, pool_reqs: rq.Reqs, it: InstanceType, taints: tuple[TaintValue, ...]
) -> bool:
    pod = ds.pod
    if tolerates_all(pod.tolerations, taints) is not None:
        return False
    for alt in rq.pod_alternatives(pod.node_selector, pod.required_node_terms):
        merged = pool_reqs.intersect(alt)
        if merged.conflict() is None and labels_ok(it, merged) and any_offering(it, merged):
            return True
    return False


def compile_pools(
    pools: Sequence[NodePool],
    instance_types: Mapping[str, Sequence[InstanceType]],
    *,
    dims: Dims,
    daemonsets: Sequence[DaemonSet],
) -> list[Pool]:
    """The pools in the order they are tried: weight descending, then name."""
    ordered = pool_order.by_weight(pools)
    return [
        _compile(i, p, instance_types.get(p.name, ()), dims=dims, daemonsets=daemonsets)
        for i, p in enumerate(ordered)
    ]


class CompiledPools:
    """Pools compiled once for many solves over the same pools, instance types and daemonsets (the
    disruption planner re-solves hundreds of times per plan, each time with the same ones): per set of
    dimensions, the pools as `compile_pools` makes them, handed out with fresh limit counters.

    Only for those exact objects (compared by identity), which the holder must not change while it
    keeps this; a solve over any other pools, types or daemonsets compiles them afresh."""

    def __init__(
        self,
        pools: Sequence[NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
        daemonsets: Sequence[DaemonSet],
    ) -> None:
        self._pools = tuple(pools)
        self._instance_types = instance_types
        self._daemonsets = daemonsets
        self._by_dims: dict[tuple[str, ...], tuple[list[Pool], SharedOptions]] = {}

    def compile(
        self,
        pools: Sequence[NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
        *,
        dims: Dims,
        daemonsets: Sequence[DaemonSet],
    ) -> tuple[list[Pool], SharedOptions | None]:
        """What `compile_pools` returns for these arguments, and the instance type options earlier solves
        over the same compiled pools made (`OptionCache`; None when these are other pools)."""
        same = (
            instance_types is self._instance_types
            and daemonsets is self._daemonsets
            and len(pools) == len(self._pools)
            and all(a is b for a, b in zip(pools, self._pools, strict=True))
        )
        if not same:
            return compile_pools(pools, instance_types, dims=dims, daemonsets=daemonsets), None
        key = tuple(dims.names)
        found = self._by_dims.get(key)
        if found is None:
            found = self._by_dims[key] = (
                compile_pools(pools, instance_types, dims=dims, daemonsets=daemonsets),
                SharedOptions(),
            )
        compiled, options = found
        # Everything but the limit counters is read-only during a solve.
        return [dataclasses.replace(p, used={k: 0 for k in p.limits}) for p in compiled], options


def _compile(
    index: int,
    pool: NodePool,
    types: Sequence[InstanceType],
    *,
    dims: Dims,
    daemonsets: Sequence[DaemonSet],
) -> Pool:
    spec = pool.spec.template.spec
    tmpl_labels = {**pool.spec.template.metadata.labels, wk.NODEPOOL: pool.name}
    reqs = rq.from_api(spec.requirements).intersect(rq.from_labels(tmpl_labels))
    custom_keys = tuple(
        sorted(
            {
                r.key
                for r in spec.requirements
                if r.operator.value == "In"
                and r.key not in TYPE_KEYS
                and r.key not in OFFERING_KEYS
                and r.key not in tmpl_labels
            }
        )
    )
    taints = tuple(TaintValue(key=t.key, effect=t.effect.value, value=t.value) for t in spec.taints)
    compiled: list[PoolType] = []
    pods_dim = dims.index[quantities.PODS]
    for it in types:
        if not (labels_ok(it, reqs) and any_offering(it, reqs)):
            continue
        cap = list(dims.vec(it.capacity))
        alloc = list(dims.vec(it.allocatable))
        if quantities.PODS not in it.capacity:
            cap[pods_dim] = alloc[pods_dim] = it.max_pods
        overhead = dims.zero
        for ds in daemonsets:
            if _daemonset_runs_on_type(ds, reqs, it, taints):
                overhead = plus(overhead, dims.vec(ds.pod.requests))
        compiled.append(
            PoolType(it=it, alloc=minus(tuple(alloc), overhead), capacity=tuple(cap), ds_overhead=overhead)
        )
    compiled.sort(key=lambda t: t.it.name)
    limits: dict[int, int] = {}
    for name, amount in pool.spec.limits_base_units().items():
        if name == "nodes":
            limits[NODES] = amount
        elif name in dims.index:
            limits[dims.index[name]] = amount
    return Pool(
        index=index,
        pool=pool,
        name=pool.name,
        reqs=reqs,
        label_keys=frozenset(tmpl_labels) | frozenset(custom_keys),
        taints=taints,
        types=compiled,
        limits=limits,
        used={k: 0 for k in limits},
        declared_types=len(types),
        min_values=tuple((r.key, r.min_values) for r in spec.requirements if r.min_values),
        custom_keys=custom_keys,
    )


def count_node(pool: Pool, capacity: Vec) -> None:
    """A node that exists (or is in flight) counts toward the pool's limits."""
    for dim in pool.limits:
        pool.used[dim] += 1 if dim == NODES else capacity[dim]


def limit_room(pool: Pool, reserved: Vec) -> dict[int, int]:
    """What the limits leave for one node that already reserved `reserved` (empty: a node not yet
    counted)."""
    return {
        dim: limit
        - pool.used[dim]
        + ((1 if reserved else 0) if dim == NODES else (reserved[dim] if reserved else 0))
        for dim, limit in pool.limits.items()
    }


def within(t: PoolType, room: Mapping[int, int]) -> bool:
    """Whether a node of the type fits in the room the limits leave."""
    for dim, r in room.items():
        if dim == NODES:
            if r < 1:
                return False
        elif t.capacity[dim] > r:
            return False
    return True


def reserve(pool: Pool, old: Vec, new: Vec) -> None:
    """A node that reserved `old` (empty: none yet) now reserves `new`."""
    for dim in pool.limits:
        if dim == NODES:
            pool.used[dim] += 0 if old else 1
        else:
            pool.used[dim] += new[dim] - (old[dim] if old else 0)


def first_fit(options: Sequence[Option], total: Vec, start: int, room: Mapping[int, int] | None) -> int:
    """Index of the first option from `start` that holds `total` within the room, or -1."""
    for i in range(start, len(options)):
        t = options[i][1]
        if all(map(le, total, t.alloc)) and (room is None or within(t, room)):
            return i
    return -1


def limit_reason(pool: Pool, options: Sequence[Option], req: Vec, *, dims: Dims) -> str:
    """Why the pool's limits leave no room for a node holding `req`, in plain words."""
    t = next((o[1] for o in options if fits(req, o[1].alloc)), options[0][1])
    parts = []
    for dim, limit in pool.limits.items():
        if dim == NODES:
            if pool.used[dim] + 1 > limit:
                used = pool.used[dim]
                parts.append(f"limit nodes={limit} reached: {used} node{'' if used == 1 else 's'} already")
            continue
        name = dims.names[dim]
        if pool.used[dim] + t.capacity[dim] > limit:
            parts.append(
                f"limit {name}={fmt(name, limit)} would be exceeded: {fmt(name, pool.used[dim])} in use "
                f"and the cheapest type that fits ({t.it.name}) adds {fmt(name, t.capacity[dim])}"
            )
    return "; ".join(parts) or "the pool's limits leave no room for a type that fits"
