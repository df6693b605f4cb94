"""The nodes a solve opens, and the NewClaims they become. Pure.

An `OpenedNode` is a node the solver opened in a pool during this solve: its requirements narrowed by the
pods that joined it, the instance type options that may still hold them (the one at its cursor is the
cheapest that does) and what it holds of its pool's limits. `OpenedNodes` holds one solve's: whether a pod
joins one of them (cost-aware: no dearer than a node of its own) or opens a new one (its pool's limits,
its topology, the reservations' free counts). When to try them in a pod's ladder is the solver's;
`new_claim` turns one, once the solve ends, into the `NewClaim` the controllers launch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from provisioner.api import labels as wk
from provisioner.api import quantities
from provisioner.scheduling import existing as ex
from provisioner.scheduling import requirements as rq
from provisioner.scheduling import reservations, scan
from provisioner.scheduling.fit import labels_missing, pool_fit
from provisioner.scheduling.offerings import Option, OptionCache, diverse, short_of_min_values
from provisioner.scheduling.pools import Pool, first_fit, limit_reason, limit_room, reserve, within
from provisioner.scheduling.resources import Dims, Vec, add, le
from provisioner.scheduling.results import NewClaim
from provisioner.scheduling.shapes import Shape
from provisioner.scheduling.topology import Topology, record, topology_reason
from provisioner.scheduling.variant import Variant
from provisioner.state.objects import HostPort, Pod


@dataclass(slots=True, eq=False)
class OpenedNode:
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


class OpenedNodes:
    """The nodes one solve opens, in the order it opens them: a pod joins one (`join`) or opens one
    (`open`), within its pool's limits, its topology and the reservations' free counts. Scans over them
    skip, for good, nodes too full for a request or blocked for a variant (`scan`)."""

    def __init__(
        self,
        *,
        cache: OptionCache,
        dims: Dims,
        topology: Topology,
        held: reservations.ReservationRoom,
        shapes: Sequence[Shape],
        cost_aware_packing: bool,
        claim_name_prefix: str,
    ) -> None:
        self.cache = cache
        self.dims = dims
        self.topology = topology
        self.reservations = held
        """The reservations' free counts, as this solve's nodes take them."""
        self.shapes = shapes
        """The solve's shapes, as it compiles them: a reservation filled up clears their pool verdicts."""
        self.cost_aware_packing = cost_aware_packing
        """A pod joins an opened node only if that costs no more than a node of its own."""
        self.claim_name_prefix = claim_name_prefix
        self.nodes: list[OpenedNode] = []
        self.count: dict[str, int] = {}
        """Per pool, the nodes opened there (the number in a node's placeholder name)."""
        self.full: dict[Vec, dict[int, int]] = {}
        """Per request vector, jumps over the opened nodes too full for it (`scan`)."""
        self.skips: dict[int, list[scan.Skip]] = {}
        """Per variant id, what refuses its pods for good (`scan.skips`)."""

    def _narrow(self, v: Variant, n: OpenedNode) -> tuple[rq.Reqs, list[Option]] | None:
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

    def join(
        self, v: Variant, pod: Pod, *, cost_aware: bool = True, pool_name: str | None = None
    ) -> OpenedNode | None:
        """An open new node the pod joins (only the pool's when `pool_name` is given). With cost-aware
        packing it joins only when that adds no more than a node of its own would cost, in this pool or
        in the first pool of its order: an untyped GPU pod does not grow an A100 node when a T4 node of
        its own is cheaper."""
        nodes = self.nodes
        cost_aware = cost_aware and self.cost_aware_packing
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
            for node in self.nodes:
                node.absorbed = {}

    def open(self, v: Variant, pool: Pool, pod: Pod, *, reserved_only: bool = False) -> OpenedNode | str:
        """A new node of the pool for the pod, on the cheapest option that holds it within the pool's
        limits (only inside a reservation when `reserved_only`), or why the pool cannot open one."""
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
        n = OpenedNode(
            index=len(self.nodes),
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
        self.nodes.append(n)
        self._hold(reservation)
        record(v, n.domain)
        return n

    def _room_taken(self, pool: Pool) -> str:
        """Which pods of this solve took the pool's room (new nodes), to say why a limit says no."""
        keys = [p.key for n in self.nodes if n.pool is pool for p in n.pods]
        if not keys:
            return ""
        shown = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        return f" (in this solve, new nodes for {shown} took the room)"

    def _next_name(self, pool: Pool, *, commit: bool) -> str:
        k = self.count.get(pool.name, 0) + 1
        if commit:
            self.count[pool.name] = k
        return f"{self.claim_name_prefix}{pool.name}-{k}"


def new_claim(n: OpenedNode, *, dims: Dims, max_options: int) -> NewClaim:
    """The NewClaim an opened node becomes when the solve ends: its cheapest type that holds its pods
    first, then up to `max_options` more (diverse enough for the pool's minValues), within the pool's
    limits; its requirements narrowed by its pods, with a value for each of the pool's own label keys;
    its pods' requests plus the DaemonSets' overhead on its first type."""
    pool = n.pool
    room = limit_room(pool, n.reserved) if pool.limits else None
    # Options are sorted cheapest first and none before the cursor fits, so the chosen type leads.
    options: list[Option] = []
    limit = max_options
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
            requests[dims.names[i]] = requests.get(dims.names[i], 0) + amount
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
