"""A tiny stand-in for `provisioner.scheduling.solve`, used only while the real scheduler is absent.

First-fit on existing nodes (resources, node selector, taints, the pod's pool list), then first-fit
decreasing into new claims of the cheapest instance type that holds them, honouring each pool's
capacity-type requirement (on-demand when none, as Karpenter). No topology: disruption tests that need
it use the real scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from provisioner.api import NodePool, quantities
from provisioner.api import labels as wk
from provisioner.api.common import Requirement
from provisioner.cloudprovider.types import InstanceType, Offering
from provisioner.scheduling.results import NewClaim, Placement, PoolReason, Results, Unschedulable
from provisioner.scheduling.solver import SolveOptions
from provisioner.state.cluster import Snapshot
from provisioner.state.objects import DaemonSet, Pod, tolerates_all


def _capacity_types(pool: NodePool) -> set[str]:
    for req in pool.spec.template.spec.requirements:
        if req.key == wk.CAPACITY_TYPE and req.operator.value == "In":
            return set(req.values)
    return {wk.CAPACITY_TYPE_ON_DEMAND}


def _fits(req: Mapping[str, int], avail: Mapping[str, int]) -> bool:
    return all(v <= avail.get(k, 0) for k, v in req.items())


def _cheapest(it: InstanceType, pool: NodePool) -> Offering | None:
    return it.cheapest(capacity_types=_capacity_types(pool))


def solve(
    pods: Sequence[Pod],
    snapshot: Snapshot,
    *,
    pools: Sequence[NodePool],
    instance_types: Mapping[str, Sequence[InstanceType]],
    daemonsets: Sequence[DaemonSet] | None = None,
    options: SolveOptions | None = None,
) -> Results:
    results = Results()
    avail = {n.name: dict(n.available) for n in snapshot.nodes if not n.cordoned and not n.deleting}
    by_name = {n.name: n for n in snapshot.nodes}
    leftovers: list[Pod] = []
    for pod in sorted(pods, key=lambda p: -p.requests.get("cpu", 0)):
        for name, free in avail.items():
            node = by_name[name]
            if not _fits(pod.requests, free):
                continue
            if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
                continue
            if pod.nodepools and node.nodepool not in pod.nodepools:
                continue
            if tolerates_all(pod.tolerations, node.taints) is not None:
                continue
            avail[name] = quantities.subtract(free, pod.requests)
            results.placements.append(Placement(pod=pod, node=name))
            break
        else:
            leftovers.append(pod)
    ordered = sorted(pools, key=lambda p: -(p.spec.weight or 0))
    bins: list[tuple[NodePool, list[Pod], dict[str, int]]] = []
    for pod in leftovers:
        allowed = [p for p in ordered if not pod.nodepools or p.name in pod.nodepools]
        if pod.nodepools:
            allowed.sort(key=lambda p: pod.nodepools.index(p.name))
        placed = False
        for pool, members, total in bins:
            if pool not in allowed:
                continue
            merged = quantities.add(total, pod.requests)
            if any(
                _fits(merged, it.allocatable) and _cheapest(it, pool)
                for it in instance_types.get(pool.name, ())
            ):
                members.append(pod)
                total.clear()
                total.update(merged)
                placed = True
                break
        if placed:
            continue
        for pool in allowed:
            if any(
                _fits(pod.requests, it.allocatable) and _cheapest(it, pool)
                for it in instance_types.get(pool.name, ())
            ):
                bins.append((pool, [pod], dict(pod.requests)))
                placed = True
                break
        if not placed:
            results.unschedulable.append(
                Unschedulable(pod=pod, reasons=[PoolReason(p.name, "no instance type fits") for p in allowed])
            )
    for index, (pool, members, total) in enumerate(bins):
        options_ = []
        for it in instance_types.get(pool.name, ()):
            offering = _cheapest(it, pool)
            if offering is not None and _fits(total, it.allocatable):
                options_.append((offering.price, it.name, it, offering))
        options_.sort(key=lambda o: (o[0], o[1]))
        types = [o[2] for o in options_]
        results.new_claims.append(
            NewClaim(
                hostname=f"new-{index}",
                nodepool=pool,
                requirements=[
                    Requirement(key=wk.INSTANCE_TYPE, operator="In", values=[t.name for t in types])
                ],
                instance_types=types,
                offering=options_[0][3],
                pods=members,
                requests=total,
            )
        )
    return results
