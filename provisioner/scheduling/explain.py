"""`explain`: one pod against each pool it may use, on its own, in the order the scheduler tries them:
fits or not, why not, and the cheapest node that would hold it alone. What `provisioner explain` prints.
Given the whole batch, a pod the full solve leaves unschedulable gets that solve's reasons instead (a
pool's limit taken by the pods placed before it, say), since alone it might have fit.

It reads the same modules the solver does (pools, existing capacity for the limits, shapes, fit), so
its verdicts are the solver's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from provisioner.api import NodePool
from provisioner.cloudprovider.types import InstanceType, Offering
from provisioner.scheduling import existing, pool_order, solver
from provisioner.scheduling.fit import pool_fit
from provisioner.scheduling.offerings import OptionCache
from provisioner.scheduling.pools import compile_pools, first_fit, limit_reason, limit_room
from provisioner.scheduling.resources import Dims
from provisioner.scheduling.shapes import Compiler
from provisioner.scheduling.topology import Topology
from provisioner.state.cluster import Snapshot
from provisioner.state.objects import DaemonSet, Pod


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
    *,
    pools: Sequence[NodePool],
    instance_types: Mapping[str, Sequence[InstanceType]],
    daemonsets: Sequence[DaemonSet] | None = None,
    defaults: pool_order.ClusterDefaults = pool_order.NO_DEFAULTS,
    pods: Sequence[Pod] | None = None,
) -> list[PoolVerdict]:
    """For one pod, each pool it may use, in the order the scheduler tries them: fits or not, why not,
    and the cheapest node that would hold it alone. Limits are counted over the snapshot's nodes, and
    `defaults` are the cluster's default pools (for a pod that names no list). With `pods` (the batch it
    is solved in), a pod the full solve leaves unschedulable gets the full solve's reason per pool."""
    ds = snapshot.daemonsets if daemonsets is None else daemonsets
    if pods is not None:
        batch = list(pods) if any(p.key == pod.key for p in pods) else [*pods, pod]
        results = solver.solve(
            batch,
            snapshot,
            pools=pools,
            instance_types=instance_types,
            daemonsets=daemonsets,
            options=solver.SolveOptions(pool_defaults=defaults),
        )
        refused = next((u for u in results.unschedulable if u.pod.key == pod.key), None)
        if refused is not None:
            return [PoolVerdict(r.nodepool, False, r.reason) for r in refused.reasons]
    dims = Dims.of([pod], daemonsets=ds, pools=pools)
    compiled = compile_pools(pools, instance_types, dims=dims, daemonsets=ds)
    # Counts every node of the snapshot toward its pool's limits.
    nodes = existing.capacity(snapshot, {p.name: p for p in compiled}, dims=dims, daemonsets=ds)
    cache = OptionCache(len(dims))
    topology = Topology(snapshot, existing=nodes, pools=compiled, cache=cache, dims=dims)
    shape = Compiler(
        pools=compiled,
        dims=dims,
        topology=topology,
        defaults=defaults,
        team_lists=pool_order.team_lists(snapshot),
    ).compile(pod)
    if shape.refused is not None:
        return [PoolVerdict(r.nodepool, False, r.reason) for r in shape.refused]
    first = shape.variants[0]
    verdicts = {
        name: PoolVerdict(name, False, f"NodePool {name} does not exist") for name in first.missing_pools
    }
    for pool in first.pools:
        verdict: PoolVerdict | None = None
        for depth, v in enumerate(shape.variants):
            fit = pool_fit(v, pool, cache=cache, dims=dims)
            if isinstance(fit, str):
                verdict = verdict if verdict is not None else PoolVerdict(pool.name, False, fit)
                continue
            room = limit_room(pool, ()) if pool.limits else None
            idx = first_fit(fit.options, v.req, 0, room)
            if idx < 0:
                verdict = PoolVerdict(pool.name, False, limit_reason(pool, fit.options, v.req, dims=dims))
                continue
            _, t, offering = fit.options[idx]
            verdict = PoolVerdict(pool.name, True, "", t.it, offering, relaxed=depth > 0)
            break
        assert verdict is not None
        verdicts[pool.name] = verdict
    return [verdicts[name] for name in first.order if name in verdicts]
