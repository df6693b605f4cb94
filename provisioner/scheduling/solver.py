"""The scheduling simulator: pods in, Results out (placements, new NodeClaims, unschedulable pods with one
reason per pool). Pure and deterministic: no clock, no I/O, no randomness. This module orchestrates; the
ideas live in their own modules (`resources`, `offerings`, `pools`, `existing`, `shapes`, `fit`,
`topology`, `order`).

About 660 lines: the placing loop is one idea (try existing capacity, claims in flight, opened nodes,
then a new node, per the pod's pool order), and it grew with pool order, reservations, the batch
ordering of issues 11, 13 and 17, and the gangs hook. Which opened nodes a pod still has to look at is
`scan`'s, which shapes go first because pods constrain each other is `order`'s, gangs are `gangs`'. The reservation pass and `_finalize` (a NewClaim
from an opened node) are the next pieces to move out.

How it decides, in order for each pod (the pods a required affinity follows and the owners of a required
anti-affinity before the pods they constrain, except that pods pinned to one domain go before a pod free
to go elsewhere that repels them; then largest first: GPUs, fewest GPU models accepted, cpu,
memory, fewest pools). Its pools and their
order come from `pool_order`: its `provisioner.sh/nodepools` list, else a default list, else every pool
by weight (desc, then name).
1. A pod without a list: existing nodes with room, then claims in flight, then the nodes this solve
   already opened, in any pool; else a new node from the first pool that takes it.
2. A pod with a list: a node no pool owns with room, then pool by pool from the top, each pool's nodes,
   claims in flight, opened nodes and then a new node, so it never takes a free node of its third pool
   while its first can launch one.
A pool takes a new node when it tolerates the pod, its requirements meet the pod's, a type is big enough,
an offering is available, its limits leave room and its domains suit the pod's topology constraints.
A new node keeps every instance type that can still hold its pods; the cheapest one wins at the end
(first fit, like Karpenter), but a pod joins a node only when that costs no more than a node of its own
(in that pool, or in the first pool of its order).
Preferences (preferred node/pod affinity, ScheduleAnyway spreads) are tried as requirements first and
relaxed one step at a time when they cannot be met.

Reservations: a reserved offering is priced zero (it is paid for either way), so within a pool it is
every type's first option. Across pools, before step 2 opens a node in pool order, every pool that can
open the pod's node inside a reservation is asked first, whatever the weights: reserved capacity is
never left idle while a heavier pool buys on-demand. Each reservation takes at most its free count of
this solve's new nodes; once used up its offerings drop out and the usual ladder follows, in this solve.

Speed comes from doing per shape what does not depend on the pod's name: pods with equal constraints,
requests and selected labels (the label keys some selector reads) share one compiled `Variant`, whose
per-pool verdicts are cached, and resources are tuples of integers over a per-solve index. Work per pod
does not grow with the nodes opened: a node too full for a request, or blocked by a hostname group, stays
so for the rest of the solve, and scans jump over such nodes (union-find with path compression).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from provisioner.api import NodePool, accelerators, quantities
from provisioner.api import labels as wk
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.types import InstanceType
from provisioner.scheduling import existing as ex
from provisioner.scheduling import gangs, pool_order, reservations, scan
from provisioner.scheduling import order as batch_order
from provisioner.scheduling import requirements as rq
from provisioner.scheduling.fit import labels_missing, pool_fit, untolerated
from provisioner.scheduling.offerings import Option, OptionCache, diverse, short_of_min_values
from provisioner.scheduling.pools import (
    CompiledPools,
    Pool,
    compile_pools,
    first_fit,
    limit_reason,
    limit_room,
    reserve,
    within,
)
from provisioner.scheduling.resources import Dims, Vec, add, le, sub
from provisioner.scheduling.results import NewClaim, Placement, PoolReason, Results, Unschedulable
from provisioner.scheduling.shapes import Compiler, Shape, ShapeKey, selected_keys, shape_key
from provisioner.scheduling.topology import Topology, record, topology_reason
from provisioner.scheduling.variant import Variant
from provisioner.state.cluster import Snapshot
from provisioner.state.objects import DaemonSet, HostPort, Pod

MAX_OPTIONS = 60
_UNOWNED_HINT = ""
"""The key of a variant's existing-node hint for the scan of the nodes no pool owns (no pool is named "")."""


@dataclass(frozen=True, slots=True)
class SolveOptions:
    """Knobs of one solve. Defaults are what the controller uses."""

    max_options: int = MAX_OPTIONS
    """Most instance type options a new claim carries (cheapest first)."""
    cost_aware_packing: bool = True
    """A pod joins an open new node only if that costs no more than a node of its own."""
    claim_name_prefix: str = ""
    """Prefix of the placeholder names of new claims (`<prefix><pool>-<n>`)."""
    pool_defaults: pool_order.ClusterDefaults = pool_order.NO_DEFAULTS
    """The cluster's default CPU and GPU pool lists, for pods that name no list (`pool_order`)."""
    compiled: CompiledPools | None = None
    """Pools already compiled for these pools, types and daemonsets (a caller solving many times over the
    same ones, as the disruption planner does); None compiles them for this solve."""
    capacity: Mapping[OfferingKey, int] | None = None
    """Instances each offering has left, where known (a scenario's `spec.capacity`): a gang's new nodes
    need room for all of them in one offering (`gangs`). None: unknown, the cloud answers at launch."""


@dataclass(slots=True, eq=False)
class _New:
    """A node this solve opened: its narrowed requirements, the options that may still hold its pods
    (the one at `cursor` is the cheapest that does) and what it reserved of its pool's limits."""

    index: int
    hostname: str
    pool: Pool
    reqs: rq.Reqs
    options: list[Option]
    maxvec: Vec
    total: Vec
    cursor: int
    pods: list[Pod] = field(default_factory=list)
    absorbed: dict[int, tuple[rq.Reqs, list[Option]] | None] = field(default_factory=dict)
    """Per variant id: the node's requirements and options once a pod of it joins (None: it cannot)."""
    reserved: Vec = ()
    host_ports: list[HostPort] = field(default_factory=list)
    """Host ports its pods hold."""

    @property
    def price(self) -> float:
        return self.options[self.cursor][0]

    def domain(self, key: str) -> str | None:
        if key == wk.HOSTNAME:
            return self.hostname
        return self.reqs.get(key).single


_Outcome = ex.Existing | _New | list[PoolReason]


class _Solver:
    def __init__(
        self,
        pods: Sequence[Pod],
        snapshot: Snapshot,
        *,
        pools: Sequence[NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
        daemonsets: Sequence[DaemonSet],
        options: SolveOptions,
    ) -> None:
        self.options = options
        self.dims = Dims.of(pods, daemonsets=daemonsets, pools=pools)
        shared = None
        if options.compiled is not None:
            self.pools, shared = options.compiled.compile(
                pools, instance_types, dims=self.dims, daemonsets=daemonsets
            )
        else:
            self.pools = compile_pools(pools, instance_types, dims=self.dims, daemonsets=daemonsets)
        self.cache = OptionCache(len(self.dims), shared=shared)
        self.existing = ex.capacity(
            snapshot, {p.name: p for p in self.pools}, dims=self.dims, daemonsets=daemonsets
        )
        self.unowned = any(n.pool is None for n in self.existing)
        """Whether some node no pool owns may take pods (tried first by pods with a pool list)."""
        self.topology = Topology(
            snapshot, existing=self.existing, pools=self.pools, cache=self.cache, dims=self.dims
        )
        self.compiler = Compiler(
            pools=self.pools,
            dims=self.dims,
            topology=self.topology,
            defaults=options.pool_defaults,
            team_lists=pool_order.team_lists(snapshot),
        )
        self.new: list[_New] = []
        self.new_count: dict[str, int] = {}
        self.shapes: list[Shape] = []
        self.reservations = reservations.Ledger(self.pools)
        self.full: dict[Vec, dict[int, int]] = {}
        """Per request vector, jumps over the opened nodes too full for it (`scan`)."""
        self.skips: dict[int, list[scan.Skip]] = {}
        """Per variant id, what refuses its pods for good (`scan.skips`)."""

    # ---- placing

    def _try_existing(
        self, v: Variant, *, pool: str | None = None, unowned: bool = False
    ) -> ex.Existing | None:
        """The first node with room that takes the variant (ready nodes, then claims in flight); only the
        pool's nodes when `pool` is given, only the nodes no pool owns when `unowned`. A node no pool owns
        (a managed node group, a node added by hand) is capacity for every pod, whatever its pool list:
        kube-scheduler places the pod there anyway."""
        req = v.req
        nodes = self.existing
        # The hint skips nodes that refused this variant before; a scan of one pool keeps its own, as it
        # skips the other pools' nodes without their refusing.
        hint = _UNOWNED_HINT if unowned else pool
        start = v.hint_existing.get(hint, 0) if v.monotone else 0
        for i in range(start, len(nodes)):
            n = nodes[i]
            if not all(map(le, req, n.avail)):
                continue
            if unowned or pool is not None:
                if n.pool != pool:  # pool is None when `unowned`
                    continue
            elif n.pool is not None and v.pool_names is not None and n.pool not in v.pool_names:
                continue
            ok = n.taint_ok.get(v.id)
            if ok is None:
                ok = n.taint_ok[v.id] = untolerated(v, n.taints) is None
            if not ok:
                continue
            ok = n.label_ok.get(v.id)
            if ok is None:
                ok = n.label_ok[v.id] = any(alt.matches(n.labels) for alt in v.alts)
            if not ok:
                continue
            if v.has_topology and not self.topology.existing_ok(v, n):
                continue
            if v.host_ports and ex.ports_conflict(v.host_ports, n.host_ports):
                continue
            if v.monotone:
                v.hint_existing[hint] = i
            n.avail = tuple(map(sub, n.avail, req))
            n.host_ports.extend(v.host_ports)
            record(v, n.domain)
            return n
        if v.monotone:
            v.hint_existing[hint] = len(nodes)
        return None

    def _narrow(self, v: Variant, n: _New) -> tuple[rq.Reqs, list[Option]] | None:
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
            if labels_missing(alt, n.pool) is not None:
                continue
            opts = self.cache.options(n.pool.index, n.pool.types, merged)
            if opts:
                result = (merged, opts)
                break
        n.absorbed[v.id] = result
        return result

    def _alone(self, v: Variant) -> float:
        """What the pod would pay for a node of its own: the standalone price in the first pool of its
        order that fits it (INF when none does)."""
        if v.alone is None:
            fits = (pool_fit(v, p, cache=self.cache, dims=self.dims) for p in v.pools)
            v.alone = next((f.standalone for f in fits if not isinstance(f, str)), float("inf"))
        return v.alone

    def _try_new_nodes(
        self, v: Variant, pod: Pod, *, cost_aware: bool = True, pool_name: str | None = None
    ) -> _New | None:
        """An open new node the pod joins (only the pool's when `pool_name` is given). With cost-aware
        packing it joins only when that adds no more than a node of its own would cost, in this pool or
        in the first pool of its order: an untyped GPU pod does not grow an A100 node when a T4 node of
        its own is cheaper."""
        nodes = self.new
        cost_aware = cost_aware and self.options.cost_aware_packing
        hinted = v.monotone and cost_aware
        start = v.hint_new.get(pool_name, 0) if hinted else 0
        req = v.req
        pool_names = v.pool_names
        skips = self.skips.get(v.id)
        if skips is None:
            skips = self.skips[v.id] = scan.skips(v, self.full)
        for n in scan.unblocked(nodes, start, skips):
            pool = n.pool
            if pool_names is not None and pool.name not in pool_names:
                continue
            if pool_name is not None and pool.name != pool_name:
                continue
            total = tuple(map(add, n.total, req))
            if not all(map(le, total, n.maxvec)):
                continue
            if v.host_ports and ex.ports_conflict(v.host_ports, n.host_ports):
                continue
            fit = pool_fit(v, pool, cache=self.cache, dims=self.dims)
            if isinstance(fit, str):
                continue
            narrowed = self._narrow(v, n)
            if narrowed is None:
                continue
            node_reqs, options = narrowed
            if v.has_topology:
                pinned = self.topology.pin(
                    v, pool, reqs=node_reqs, options=options, hostname=n.hostname, total=total
                )
                if pinned is None:
                    continue
                node_reqs, options = pinned
            changed = options is not n.options
            room = limit_room(pool, n.reserved) if pool.limits else None
            idx = first_fit(options, total, 0 if changed else n.cursor, room)
            if idx < 0:
                continue
            price = options[idx][0]
            if cost_aware:
                own = fit.standalone if pool_name is not None else min(fit.standalone, self._alone(v))
                if price - n.price > own + 1e-9:
                    continue
            if pool.min_values and short_of_min_values(
                pool.min_values, [o for o in options[idx:] if all(map(le, total, o[1].alloc))]
            ):
                continue
            if self.reservations:
                old = reservations.reservation_of(n.options[n.cursor])
                new = reservations.reservation_of(options[idx])
                if new != old and new is not None and new in self.cache.exhausted:
                    continue  # the node's grown type would take a reservation this solve already filled
                if new != old:
                    self.reservations.release(old)
                    self._hold(new)
            if hinted:
                v.hint_new[pool_name] = n.index
            t = options[idx][1]
            if pool.limits:
                reserve(pool, n.reserved, t.capacity)
            n.reserved = t.capacity
            if changed:
                n.reqs, n.options = node_reqs, options
                n.maxvec = self.cache.maxvec(options)
                n.absorbed = {}
            n.cursor = idx
            n.total = total
            n.pods.append(pod)
            n.host_ports.extend(v.host_ports)
            record(v, n.domain)
            return n
        if hinted:
            v.hint_new[pool_name] = len(nodes)
        return None

    def _hold(self, reservation_id: str | None) -> None:
        if reservation_id is not None and self.reservations.hold(reservation_id):
            # Full for the rest of the solve: rebuilt option lists and pool verdicts leave it out.
            self.cache.exhaust(reservation_id)
            for shape in self.shapes:
                for variant in shape.variants:
                    variant.pool_fit.clear()
            for node in self.new:
                node.absorbed = {}

    def _open(self, v: Variant, pool: Pool, pod: Pod, *, reserved_only: bool = False) -> _New | str:
        fit = pool_fit(v, pool, cache=self.cache, dims=self.dims)
        if isinstance(fit, str):
            return fit
        name = self._next_name(pool, commit=False)
        node_reqs, options = fit.reqs, fit.options
        if v.has_topology:
            pinned = self.topology.pin(v, pool, reqs=node_reqs, options=options, hostname=name, total=v.req)
            if pinned is None:
                return topology_reason(v)
            node_reqs, options = pinned
        room = limit_room(pool, ()) if pool.limits else None
        idx = first_fit(options, v.req, 0, room)
        if idx < 0:
            if room is not None:
                return limit_reason(pool, options, v.req, dims=self.dims) + self._room_taken(pool)
            return "no instance type fits"  # unreachable: pool_fit found one
        reservation = reservations.reservation_of(options[idx])
        if reserved_only and reservation is None:
            return "no reservation of the pool holds it"
        t = options[idx][1]
        if pool.limits:
            reserve(pool, (), t.capacity)
        self._next_name(pool, commit=True)
        n = _New(
            index=len(self.new),
            hostname=name,
            pool=pool,
            reqs=node_reqs,
            options=options,
            maxvec=self.cache.maxvec(options),
            total=v.req,
            cursor=idx,
            pods=[pod],
            reserved=t.capacity,
            host_ports=list(v.host_ports),
        )
        self.new.append(n)
        self._hold(reservation)
        record(v, n.domain)
        return n

    def _room_taken(self, pool: Pool) -> str:
        """Which pods of this solve took the pool's room (new nodes), to say why a limit says no."""
        keys = [p.key for n in self.new if n.pool is pool for p in n.pods]
        if not keys:
            return ""
        shown = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        return f" (in this solve, new nodes for {shown} took the room)"

    def _next_name(self, pool: Pool, *, commit: bool) -> str:
        k = self.new_count.get(pool.name, 0) + 1
        if commit:
            self.new_count[pool.name] = k
        return f"{self.options.claim_name_prefix}{pool.name}-{k}"

    def _place(self, pod: Pod, shape: Shape) -> _Outcome:
        if shape.refused is not None:
            return list(shape.refused)
        reasons: list[PoolReason] = []
        for v in shape.variants:
            # A pod with a pool list (its own, or a default one) tries its pools from the top, each with
            # its nodes, its claims in flight, the nodes this solve opened there and then a new node: it
            # does not take a free node of its third pool while its first pool can launch one; room on a
            # node no pool owns comes first (kube-scheduler would use it anyway). A pod without a list
            # takes free capacity anywhere first, as Karpenter does.
            listed = v.pool_names is not None
            if not listed:
                existing = self._try_existing(v)
                if existing is not None:
                    return existing
                node = self._try_new_nodes(v, pod)
                if node is not None:
                    return node
            elif self.unowned:
                existing = self._try_existing(v, unowned=True)
                if existing is not None:
                    return existing
            why = {name: f"NodePool {name} does not exist" for name in v.missing_pools}
            if self.reservations and self.reservations.left():
                # Reservations before any pool launches spot or on-demand (a listed pod still takes
                # free room on a pool's nodes before a reservation of a later pool in its list).
                for pool in v.pools:
                    if listed:
                        existing = self._try_existing(v, pool=pool.name)
                        if existing is not None:
                            return existing
                        node = self._try_new_nodes(v, pod, pool_name=pool.name)
                        if node is not None:
                            return node
                    opened = self._open(v, pool, pod, reserved_only=True)
                    if not isinstance(opened, str):
                        return opened
            for pool in v.pools:
                if listed:
                    existing = self._try_existing(v, pool=pool.name)
                    if existing is not None:
                        return existing
                    node = self._try_new_nodes(v, pod, pool_name=pool.name)
                    if node is not None:
                        return node
                opened = self._open(v, pool, pod)
                if isinstance(opened, str):
                    why[pool.name] = opened
                    continue
                return opened
            reasons = [PoolReason(name, why[name]) for name in v.order if name in why]
            if self.options.cost_aware_packing:
                # No pool can open a node (limits, topology): a dearer open node beats none.
                node = self._try_new_nodes(v, pod, cost_aware=False)
                if node is not None:
                    return node
        if not reasons:
            reasons = [PoolReason("", "no NodePool exists")]
        return reasons

    # ---- the solve

    def solve(self, pods: Sequence[Pod]) -> Results:
        by_key: dict[ShapeKey, Shape] = {}
        pod_shapes: list[tuple[Pod, Shape]] = []
        firsts: list[tuple[Shape, Pod]] = []
        selected = selected_keys([*pods, *ex.anti_affine_pods(self.existing)])
        for pod in pods:
            key = shape_key(pod, selected)
            shape = by_key.get(key)
            if shape is None:
                shape = by_key[key] = self.compiler.compile(pod)
                firsts.append((shape, pod))
                self.shapes.append(shape)
            pod_shapes.append((pod, shape))
        self.topology.add_running_owners()
        for shape, pod in firsts:
            self.compiler.link(shape, pod)
        self.topology.count_running()

        accel = self._accelerator_dims()
        cpu, mem = self.dims.index[quantities.CPU], self.dims.index[quantities.MEMORY]
        depth = batch_order.depths(firsts, self.topology)
        choice: dict[int, tuple[int, int]] = {id(shape): self._choice(shape) for shape, _ in firsts}

        def order(item: tuple[Pod, Shape]) -> tuple[int, int, int, int, int, int, int, str]:
            pod, shape = item
            r = shape.variants[0].req
            pools, models = choice[id(shape)]
            gpus = sum(r[d] for d in accel)
            # Fewer GPU models first among pods of equal GPU count; the pool count only breaks ties
            # below size, so a flexible large pod still opens its heavier pool before small ones fill
            # a lighter pool's node it would then join.
            return (depth[id(shape)], -pod.priority, -gpus, models, -r[cpu], -r[mem], pools, pod.key)

        results = Results()
        for pod, shape in sorted(pod_shapes, key=order):
            outcome = self._place(pod, shape)
            if isinstance(outcome, list):
                results.unschedulable.append(Unschedulable(pod=pod, reasons=outcome))
            elif outcome.__class__ is ex.Existing:
                results.placements.append(Placement(pod=pod, node=outcome.name))
        results.new_claims = [self._finalize(n) for n in self.new]
        return results

    def _accelerator_dims(self) -> list[int]:
        """The solve's dimensions that are accelerators (`accelerators.is_accelerator`: GPUs of any
        maker, MIG slices, Neuron)."""
        return [i for i, name in enumerate(self.dims.names) if accelerators.is_accelerator(name)]

    def _choice(self, shape: Shape) -> tuple[int, int]:
        """How much choice a shape has, read from requirements and taints only (no instance type is
        scanned): the pools that may take it, and for a GPU pod the GPU models it accepts. The most
        constrained go first, so a pod pinned to one model is not left without room by pods that could
        have used another."""
        v = shape.variants[-1]
        gpu = any(v.req[d] > 0 for d in self._accelerator_dims())
        pools = 0
        models: set[str] = set()
        any_model = False
        for pool in v.pools:
            if untolerated(v, pool.taints) is not None:
                continue
            usable = False
            for alt in v.alts:
                merged = pool.reqs.intersect(alt)
                if merged.conflict() is not None or labels_missing(alt, pool) is not None:
                    continue
                usable = True
                if gpu:
                    allowed = merged.get(wk.GPU_NAME).allowed
                    if allowed is None:
                        any_model = True
                    else:
                        models |= allowed
            pools += usable
        return pools, (len(wk.GPU_NAMES) + 1 if any_model else len(models))

    def _finalize(self, n: _New) -> NewClaim:
        pool = n.pool
        room = limit_room(pool, n.reserved) if pool.limits else None
        # Options are sorted cheapest first and none before the cursor fits, so the chosen type leads.
        options: list[Option] = []
        limit = self.options.max_options
        total = n.total
        fitting = (
            opt
            for opt in n.options[n.cursor :]
            if all(map(le, total, opt[1].alloc)) and (room is None or within(opt[1], room))
        )
        if pool.min_values:
            options = diverse(list(fitting), pool.min_values, limit)
        else:
            for opt in fitting:
                options.append(opt)
                if len(options) >= limit:
                    break
        types = [t.it for _, t, _ in options]
        first = options[0][1]
        reqs, labels = _custom_labels(pool, n.reqs)
        requirements = [r for r in reqs.to_requirements() if r.key not in (wk.INSTANCE_TYPE, wk.NODEPOOL)]
        requirements += rq.KeyReq(frozenset(it.name for it in types), absent_ok=False).to_requirements(
            wk.INSTANCE_TYPE
        )
        requirements[-1] = requirements[-1].model_copy(update={"values": [it.name for it in types]})
        requests: dict[str, int] = {}
        for pod in n.pods:
            requests = quantities.add(requests, pod.requests)
        for i, amount in enumerate(first.ds_overhead):
            if amount:
                requests[self.dims.names[i]] = requests.get(self.dims.names[i], 0) + amount
        return NewClaim(
            hostname=n.hostname,
            nodepool=pool.pool,
            requirements=requirements,
            instance_types=types,
            offering=options[0][2],
            pods=list(n.pods),
            requests=requests,
            labels=labels,
        )


class SolveFn(Protocol):
    """The type of `solve`, for those handed it (the controllers, the disruption planner) so a test or a
    benchmark can pass a stand-in."""

    def __call__(
        self,
        pods: Sequence[Pod],
        snapshot: Snapshot,
        /,
        *,
        pools: Sequence[NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
        daemonsets: Sequence[DaemonSet] | None = None,
        options: SolveOptions | None = None,
    ) -> Results: ...


def _custom_labels(pool: Pool, reqs: rq.Reqs) -> tuple[rq.Reqs, dict[str, str]]:
    """A value for each key the pool defines (the one allowed, else the first by name, as Karpenter
    picks one), with the requirements pinned to it so the claim and its node agree."""
    labels: dict[str, str] = {}
    for key in pool.custom_keys:
        kreq = reqs.get(key)
        value = kreq.single
        if value is None and kreq.allowed:
            value = min(kreq.allowed)
            reqs = reqs.intersect(rq.Reqs(((key, rq.KeyReq(frozenset({value}), absent_ok=False)),)))
        if value is not None:
            labels[key] = value
    return reqs, labels


def solve(
    pods: Sequence[Pod],
    snapshot: Snapshot,
    *,
    pools: Sequence[NodePool],
    instance_types: Mapping[str, Sequence[InstanceType]],
    daemonsets: Sequence[DaemonSet] | None = None,
    options: SolveOptions | None = None,
) -> Results:
    """Decide where every pod goes: existing capacity, a new NodeClaim, or nowhere (with reasons).

    `instance_types` maps a pool name to the types its NodeClass can launch (unavailable offerings
    flagged). `daemonsets` default to the snapshot's. Pods need not be pending in the snapshot: the
    disruption planner passes the pods of nodes it removed from the snapshot. The snapshot is taken as
    it is: `existing` owns how its nodes count (deleting ones toward limits, not as room). A pod whose
    requests are malformed or negative (`Pod.invalid`) is unschedulable with that reason, launching nothing.
    """
    refused = [
        Unschedulable(pod=p, reasons=[PoolReason("", f"invalid pod: {p.invalid}")]) for p in pods if p.invalid
    ]
    if refused:
        pods = [p for p in pods if not p.invalid]
    opts = options or SolveOptions()
    ds = snapshot.daemonsets if daemonsets is None else daemonsets

    def inner(batch: Sequence[Pod]) -> Results:
        solver = _Solver(
            batch, snapshot, pools=pools, instance_types=instance_types, daemonsets=ds, options=opts
        )
        return solver.solve(batch)

    if gangs.has_gangs(pods):
        # Gangs are placed whole in one zone or not at all, over solves of the plain kind (`gangs`).
        zones = {o.zone for types in instance_types.values() for t in types for o in t.offerings}
        zones.update(z for n in snapshot.nodes if (z := n.labels.get(wk.ZONE)))
        results = gangs.solve(pods, snapshot, inner=inner, zones=sorted(zones), capacity=opts.capacity)
    else:
        results = inner(pods)
    results.unschedulable.extend(refused)
    return results
