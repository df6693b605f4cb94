"""The cheapest real packing of a set of pods: whole nodes, whole pods, on the pools' own instance types,
offerings and limits, solved exactly as a MILP with HiGHS (scipy.optimize.milp).

Used by `bench/cost.py` (our $/h against it) and by `provisioner simulate` (the best possible cost of a
run, interval by interval: `provisioner.finops.optimum`). Pure: pods, pools and types in, a price out.

What it keeps of the scheduling problem: each pod's requests (cpu, memory, pods, GPUs), node selector and
required node affinity, the pools' requirements and taints, the offerings a pool's capacity-type and zone
requirements allow (available ones; reserved capacity is left out: it is paid whether used or not), and
each pool's `limits` on cpu, memory and GPUs. What it relaxes: pod (anti-)affinity and topology spread,
DaemonSet overhead, and the launch order: so its optimum is at most what any real packing costs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix

from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.api.quantities import CPU, MEMORY, PODS
from provisioner.cloudprovider.types import InstanceType
from provisioner.scheduling import requirements as rq
from provisioner.state.objects import Pod, TaintValue, tolerates_all

RESOURCES = (CPU, MEMORY, PODS, wk.GPU_RESOURCE)
LIMITED = (CPU, MEMORY, wk.GPU_RESOURCE, "nodes")
"""The resources a pool's `limits` bound (on the nodes' capacity, as Karpenter counts them; `nodes`: how
many)."""


@dataclass(frozen=True, slots=True)
class PackingProblem:
    """The shared input of the bounds and the exact optimum."""

    classes: list[tuple[Pod, int]]
    """Pod classes: a pod, and how many pods alike (the same requests, selector, affinity, tolerations)."""
    columns: list[tuple[NodePool, InstanceType, float]]
    """One per (pool, type) with a price: the cheapest offering the pool's requirements allow."""
    pairs: list[tuple[int, int]]
    """(class, column) where a pod of the class may run on a node of the column."""


def price(it: InstanceType, reqs: rq.Reqs) -> float | None:
    """The cheapest available, not reserved offering of the type the requirements allow."""
    zreq, creq = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
    prices = [
        o.price
        for o in it.offerings
        if o.available
        and o.capacity_type != wk.CAPACITY_TYPE_RESERVED
        and zreq.matches(o.zone)
        and creq.matches(o.capacity_type)
    ]
    return min(prices) if prices else None


def allocatable(it: InstanceType) -> dict[str, int]:
    alloc = dict(it.allocatable)
    alloc.setdefault(PODS, it.max_pods)
    return alloc


def problem(
    pods: Sequence[Pod],
    node_pools: Sequence[NodePool],
    types: Sequence[InstanceType] | Mapping[str, Sequence[InstanceType]],
) -> PackingProblem:
    """Pods, pools and the instance types (one list for every pool, or pool -> its list) as a
    `PackingProblem`."""
    classes: dict[tuple[object, ...], tuple[Pod, int]] = {}
    for p in pods:
        key = (
            tuple(sorted(p.requests.items())),
            tuple(sorted(p.node_selector.items())),
            p.required_node_terms,
            p.tolerations,
        )
        first, n = classes.get(key, (p, 0))
        classes[key] = (first, n + 1)
    columns: list[tuple[NodePool, InstanceType, float]] = []
    for np_ in node_pools:
        reqs = rq.from_api(np_.spec.template.spec.requirements)
        offered = types.get(np_.name, ()) if isinstance(types, Mapping) else types
        for it in offered:
            if not all(
                req.matches(it.labels.get(key))
                for key, req in reqs.items
                if key not in (wk.ZONE, wk.CAPACITY_TYPE)
            ):
                continue
            found = price(it, reqs)
            if found is not None:
                columns.append((np_, it, found))
    class_list = list(classes.values())
    pairs: list[tuple[int, int]] = []
    for ci, (p, _) in enumerate(class_list):
        alts = rq.pod_alternatives(p.node_selector, p.required_node_terms)
        for ti, (np_, it, _) in enumerate(columns):
            taints = tuple(TaintValue(t.key, t.effect.value, t.value) for t in np_.spec.template.spec.taints)
            if tolerates_all(p.tolerations, taints) is not None:
                continue
            if not any(alt.matches(it.labels) for alt in alts):
                continue
            alloc = allocatable(it)
            if all(p.requests.get(r, 0) <= alloc.get(r, 0) for r in RESOURCES):
                pairs.append((ci, ti))
    return PackingProblem(class_list, columns, pairs)


def placeable(pods: Sequence[Pod], found: PackingProblem) -> int:
    """How many of the pods some column can take (the others are left out of the optimum)."""
    takes = {ci for ci, _ in found.pairs}
    return sum(n for ci, (_, n) in enumerate(found.classes) if ci in takes)


def exact_optimum(
    pods: Sequence[Pod],
    node_pools: Sequence[NodePool],
    types: Sequence[InstanceType] | Mapping[str, Sequence[InstanceType]],
    *,
    ceiling: float,
    time_limit: float,
) -> tuple[float | None, str]:
    """The cheapest real packing: whole nodes, whole pods, each node's resources and each pool's limits
    respected (a MILP, HiGHS). Returns (its $/h or None, HiGHS's status). Pods no column can take are
    left out (they are pending in any packing).

    Per column, node slots y[t,k] (binary, used in order) and pods per class and slot z[c,t,k] (integer).
    Exact reductions keep it small: a column another column of the same pool dominates (no dearer, at
    least as large in every resource, able to take every class it takes) is dropped, since swapping such
    a node never costs more nor counts more against the pool's limits... unless it is larger, so a pool
    with limits keeps every column; and a column has at most min(pods it can take, ceiling / its price)
    slots, since an optimum costs at most `ceiling` (any real packing's $/h)."""
    found = problem(pods, node_pools, types)
    class_list, columns, pairs = found.classes, found.columns, found.pairs
    takes: dict[int, set[int]] = {}
    for ci, ti in pairs:
        takes.setdefault(ti, set()).add(ci)
    if not takes:
        return 0.0, "optimal"
    allocs = {ti: allocatable(columns[ti][1]) for ti in takes}
    limited = {np_.name for np_, _, _ in columns if np_.spec.limits_base_units()}

    def dominated(ti: int) -> bool:
        if columns[ti][0].name in limited:
            return False
        for other in takes:
            if other == ti or not takes[ti] <= takes[other] or columns[other][2] > columns[ti][2]:
                continue
            larger = all(allocs[other].get(r, 0) >= allocs[ti].get(r, 0) for r in RESOURCES)
            # Equal columns: keep the first, drop the later ones.
            strictly = (
                columns[other][2] < columns[ti][2]
                or other < ti
                or any(allocs[other].get(r, 0) > allocs[ti].get(r, 0) for r in RESOURCES)
            )
            if larger and strictly:
                return True
        return False

    kept = [ti for ti in sorted(takes) if not dominated(ti)]
    slots: list[tuple[int, int]] = []  # (column, k)
    for ti in kept:
        eligible = sum(class_list[ci][1] for ci in takes[ti])
        cost = columns[ti][2]
        room = eligible if cost <= 0 else min(eligible, int(ceiling / cost + 1e-9))
        slots.extend((ti, k) for k in range(room))
    classes_taken = {ci for ti in kept for ci in takes[ti]}
    z_vars = [(ci, si) for si, (ti, _) in enumerate(slots) for ci in sorted(takes[ti])]
    n_y, n_z = len(slots), len(z_vars)
    cost_vector = np.concatenate([np.array([columns[ti][2] for ti, _ in slots]), np.zeros(n_z)])
    a_eq = lil_matrix((len(class_list), n_y + n_z))
    for j, (ci, _) in enumerate(z_vars):
        a_eq[ci, n_y + j] = 1.0
    b_eq = np.array([float(n) if ci in classes_taken else 0.0 for ci, (_, n) in enumerate(class_list)])
    pools_limited = sorted(limited)
    limit_rows = [(name, r) for name in pools_limited for r in LIMITED]
    a_ub = lil_matrix((n_y * len(RESOURCES) + n_y + len(limit_rows), n_y + n_z))
    b_ub = np.zeros(a_ub.shape[0])
    for si, (ti, k) in enumerate(slots):
        alloc = allocs[ti]
        for r_index, r in enumerate(RESOURCES):
            a_ub[si * len(RESOURCES) + r_index, si] = -alloc.get(r, 0) / float(max(alloc.get(r, 0), 1))
        if k > 0:  # slots of a column are used in order (symmetry)
            a_ub[n_y * len(RESOURCES) + si, si] = 1.0
            a_ub[n_y * len(RESOURCES) + si, si - 1] = -1.0
    base = n_y * len(RESOURCES) + n_y
    for row, (name, r) in enumerate(limit_rows):
        limit = next(np_ for np_, _, _ in columns if np_.name == name).spec.limits_base_units().get(r)
        if limit is None:
            b_ub[base + row] = np.inf
            continue
        b_ub[base + row] = 1.0
        for si, (ti, _) in enumerate(slots):
            np_, it, _ = columns[ti]
            amount = 1 if r == "nodes" else it.capacity.get(r, 0)
            if np_.name == name and amount:
                a_ub[base + row, si] = amount / float(max(limit, 1))
    for j, (ci, si) in enumerate(z_vars):
        pod = class_list[ci][0]
        alloc = allocs[slots[si][0]]
        for r_index, r in enumerate(RESOURCES):
            amount = pod.requests.get(r, 0)
            if amount:
                a_ub[si * len(RESOURCES) + r_index, n_y + j] = amount / float(max(alloc.get(r, 0), 1))
    upper = np.concatenate([np.ones(n_y), np.full(n_z, np.inf)])
    result = milp(
        cost_vector,
        constraints=[
            LinearConstraint(a_ub.tocsr(), -np.inf, b_ub),
            LinearConstraint(a_eq.tocsr(), b_eq, b_eq),
        ],
        integrality=np.ones(n_y + n_z),
        bounds=Bounds(np.zeros(n_y + n_z), upper),
        options={"time_limit": time_limit},
    )
    if result.status == 0 and result.x is not None:
        return float(result.fun), "optimal"
    return None, str(result.message)
