"""The disruption tests' defaults over the shared builders (testkit/builders.py): pools with a disruption
block and on-demand only, single-zone instance types without overhead, pods of the `ml` namespace (team
`research`) owned by a ReplicaSet, and snapshots that carry the pools.

Each takes keyword overrides so a test says only what matters to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.cloudprovider.types import InstanceType, Offering
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import Pod, PodDisruptionBudget
from testkit import builders
from testkit.builders import LONG_AGO, NOW, state_node

__all__ = ["LONG_AGO", "NOW", "instance_type", "node_pool", "pdb", "pod", "snapshot", "state_node"]

NAMESPACE = "ml"


def node_pool(
    name: str = "default",
    *,
    policy: str = "WhenEmptyOrUnderutilized",
    consolidate_after: str = "0s",
    budgets: list[dict[str, Any]] | None = None,
    capacity_types: Sequence[str] | None = ("on-demand",),
    expire_after: str = "720h",
    min_savings: str = "0",
    weight: int | None = None,
    labels: dict[str, str] | None = None,
) -> NodePool:
    disruption: dict[str, Any] = {
        "consolidationPolicy": policy,
        "consolidateAfter": consolidate_after,
        "minSavingsPerPodHour": min_savings,
    }
    if budgets is not None:
        disruption["budgets"] = budgets
    return builders.node_pool(
        name,
        weight=weight,
        labels=labels,
        requirements=[builders.req(wk.CAPACITY_TYPE, "In", *capacity_types)] if capacity_types else (),
        expire_after=expire_after,
        disruption=disruption,
    )


def instance_type(
    name: str = "m.large",
    *,
    cpu: int = 4,
    memory_gib: int = 16,
    price: float = 0.2,
    spot_price: float | None = None,
    gpus: int = 0,
    gpu_name: str = "a100",
    zones: Sequence[str] = ("zone-a",),
    spot_available: bool = True,
    on_demand_available: bool = True,
) -> InstanceType:
    offers = [
        Offering(zone=z, capacity_type="on-demand", price=price, available=on_demand_available) for z in zones
    ]
    if spot_price is not None:
        offers += [
            Offering(zone=z, capacity_type="spot", price=spot_price, available=spot_available) for z in zones
        ]
    return builders.instance_type(
        name,
        cpu=cpu,
        memory_gib=memory_gib,
        gpus=gpus,
        gpu_name=gpu_name,
        overhead_cpu_m=0,
        overhead_memory_mib=0,
        offers=tuple(offers),
    )


def pod(
    name: str,
    *,
    namespace: str = NAMESPACE,
    node: str | None = None,
    owner: str | None = "ReplicaSet",
    priority: int = 0,
    **kw: Any,
) -> Pod:
    return builders.pod(name, namespace=namespace, node_name=node, owner=owner, priority=priority, **kw)


def pdb(name: str, *, namespace: str = NAMESPACE, **kw: Any) -> PodDisruptionBudget:
    return builders.pdb(name, namespace=namespace, **kw)


def snapshot(
    nodes: Sequence[StateNode],
    *,
    pools: Sequence[NodePool] = (),
    pdbs: Sequence[PodDisruptionBudget] = (),
    namespaces: dict[str, dict[str, str]] | None = None,
) -> Snapshot:
    return builders.state_snapshot(
        nodes,
        pools=tuple(pools) or (node_pool(),),
        pdbs=pdbs,
        namespaces=namespaces or {NAMESPACE: {wk.TEAM: "research"}},
    )
