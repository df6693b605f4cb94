"""Running the scheduler with the builders' defaults (`run`: one `default` pool over `cpu_types()`) and
reading its results (`claim_of`, `reasons_of`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from provisioner.api import NodePool
from provisioner.cloudprovider.types import InstanceType
from provisioner.scheduling import NewClaim, Results, SolveOptions, solve
from provisioner.state.cluster import Snapshot
from provisioner.state.objects import DaemonSet, Pod
from testkit.builders.nodes import snapshot
from testkit.builders.pools import cpu_types, node_pool


def run(
    pods: Sequence[Pod],
    pools: Sequence[NodePool] | NodePool | None = None,
    types: Sequence[InstanceType] | Mapping[str, Sequence[InstanceType]] | None = None,
    *,
    snap: Snapshot | None = None,
    daemonsets: Sequence[DaemonSet] | None = None,
    options: SolveOptions | None = None,
) -> Results:
    """Solve with defaults: one `default` pool over `cpu_types()`."""
    if pools is None:
        pools = [node_pool()]
    elif isinstance(pools, NodePool):
        pools = [pools]
    if types is None:
        types = cpu_types()
    per_pool = types if isinstance(types, Mapping) else {p.name: list(types) for p in pools}
    return solve(
        pods,
        snap or snapshot(),
        pools=pools,
        instance_types=per_pool,
        daemonsets=daemonsets,
        options=options,
    )


def claim_of(results: Results, pod_name: str) -> NewClaim | None:
    """The new claim holding the pod, or None."""
    return next((c for c in results.new_claims if any(p.name == pod_name for p in c.pods)), None)


def reasons_of(results: Results, pod_name: str) -> dict[str, str]:
    u = next((u for u in results.unschedulable if u.pod.name == pod_name), None)
    assert u is not None, f"{pod_name} is not unschedulable"
    return {r.nodepool: r.reason for r in u.reasons}
