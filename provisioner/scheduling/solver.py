"""The scheduling simulator: pods in, Results out (placements, new NodeClaims, unschedulable pods with one
reason per pool). Pure and deterministic: no clock, no I/O, no randomness. This module owns the ladder
each pod climbs (existing capacity, claims in flight, the nodes this solve opened, a new node, per the
pod's pool order) and the pass over a batch; the ideas live in their own modules (`resources`,
`offerings`, `pools`, `existing`, `shapes`, `fit`, `topology`): which shapes go first is `order`'s, the
nodes a solve opens and the NewClaims they become `opened`'s, which opened nodes a pod still has to look
at `scan`'s, gangs `gangs`'.

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
from dataclasses import dataclass
from typing import Protocol

from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.types import InstanceType
from provisioner.scheduling import existing as ex
from provisioner.scheduling import gangs, pool_order, reservations
from provisioner.scheduling import order as batch_order
from provisioner.scheduling.fit import untolerated
from provisioner.scheduling.offerings import OptionCache
from provisioner.scheduling.opened import OpenedNode, OpenedNodes, new_claim
from provisioner.scheduling.pools import (
    CompiledPools,
    Pool,
    compile_pools,
)
from provisioner.scheduling.resources import Dims, le, sub
from provisioner.scheduling.results import Placement, PoolReason, Results, Unschedulable
from provisioner.scheduling.shapes import Compiler, Shape, ShapeKey, selected_keys, shape_key, shape_parts
from provisioner.scheduling.topology import Topology, record
from provisioner.scheduling.variant import Variant
from provisioner.state.cluster import Snapshot
from provisioner.state.objects import DaemonSet, Pod

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


_Outcome = ex.Existing | OpenedNode | list[PoolReason]


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
        self.shapes: list[Shape] = []
        self.reservations = reservations.ReservationRoom(self.pools)
        self.opened = OpenedNodes(
            cache=self.cache,
            dims=self.dims,
            topology=self.topology,
            held=self.reservations,
            shapes=self.shapes,
            cost_aware_packing=options.cost_aware_packing,
            claim_name_prefix=options.claim_name_prefix,
        )

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

    def _in_pool(
        self, v: Variant, pod: Pod, pool: Pool, *, listed: bool, reserved_only: bool = False
    ) -> ex.Existing | OpenedNode | str:
        """One pool's rung of the ladder: for a pod with a pool list, the pool's nodes and claims in
        flight, then the nodes this solve opened there; then a new node (only inside a reservation when
        `reserved_only`). A string says why the pool cannot open one."""
        if listed:
            existing = self._try_existing(v, pool=pool.name)
            if existing is not None:
                return existing
            node = self.opened.join(v, pod, pool_name=pool.name)
            if node is not None:
                return node
        return self.opened.open(v, pool, pod, reserved_only=reserved_only)

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
                node = self.opened.join(v, pod)
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
                    found = self._in_pool(v, pod, pool, listed=listed, reserved_only=True)
                    if not isinstance(found, str):
                        return found
            for pool in v.pools:
                found = self._in_pool(v, pod, pool, listed=listed)
                if isinstance(found, str):
                    why[pool.name] = found
                    continue
                return found
            reasons = [PoolReason(name, why[name]) for name in v.order if name in why]
            if self.options.cost_aware_packing:
                # No pool can open a node (limits, topology): a dearer open node beats none.
                node = self.opened.join(v, pod, cost_aware=False)
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
        by_parts: dict[tuple[object, ...], Shape] = {}
        selected = selected_keys([*pods, *ex.anti_affine_pods(self.existing)])
        for pod in pods:
            # Pods sharing their parsed parts share a shape: their key is not built and hashed again.
            parts = shape_parts(pod)
            shape = by_parts.get(parts)
            if shape is None:
                key = shape_key(pod, selected)
                shape = by_key.get(key)
                if shape is None:
                    shape = by_key[key] = self.compiler.compile(pod)
                    firsts.append((shape, pod))
                    self.shapes.append(shape)
                by_parts[parts] = shape
            pod_shapes.append((pod, shape))
        self.topology.add_running_owners()
        for shape, pod in firsts:
            self.compiler.link(shape, pod)
        self.topology.count_running()

        results = Results()
        for pod, shape in batch_order.placing_order(
            pod_shapes, firsts, topology=self.topology, dims=self.dims
        ):
            outcome = self._place(pod, shape)
            if isinstance(outcome, list):
                results.unschedulable.append(Unschedulable(pod=pod, reasons=outcome))
            elif outcome.__class__ is ex.Existing:
                results.placements.append(Placement(pod=pod, node=outcome.name))
        results.new_claims = [
            new_claim(n, dims=self.dims, max_options=self.options.max_options) for n in self.opened.nodes
        ]
        return results


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
