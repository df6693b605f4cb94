"""Builders for disruption tests: pools, instance types, pods, nodes with claims, PDBs, snapshots.

Each takes keyword overrides so a test says only what matters to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from provisioner.api import NodeClaim, NodePool
from provisioner.api import labels as wk
from provisioner.cloudprovider.types import GPU, InstanceType, Offering, instance_labels
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import Node, Pod, PodDisruptionBudget

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
LONG_AGO = NOW - timedelta(days=2)
GiB = 2**30


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
    requirements = []
    if capacity_types:
        requirements.append({"key": wk.CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)})
    disruption: dict[str, Any] = {
        "consolidationPolicy": policy,
        "consolidateAfter": consolidate_after,
        "minSavingsPerPodHour": min_savings,
    }
    if budgets is not None:
        disruption["budgets"] = budgets
    return NodePool.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "weight": weight,
                "template": {
                    "metadata": {"labels": labels or {}},
                    "spec": {
                        "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
                        "requirements": requirements,
                        "expireAfter": expire_after,
                    },
                },
                "disruption": disruption,
            },
        }
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
    offerings = [
        Offering(zone=z, capacity_type="on-demand", price=price, available=on_demand_available) for z in zones
    ]
    if spot_price is not None:
        offerings += [
            Offering(zone=z, capacity_type="spot", price=spot_price, available=spot_available) for z in zones
        ]
    gpu = GPU(name=gpu_name, count=gpus, memory_mib=40960) if gpus else None
    capacity = {"cpu": cpu * 1000, "memory": memory_gib * GiB, "pods": 110}
    if gpus:
        capacity[wk.GPU_RESOURCE] = gpus
    return InstanceType(
        name=name,
        capacity=capacity,
        offerings=tuple(offerings),
        labels=instance_labels(name=name, vcpu=cpu, memory_mib=memory_gib * 1024, gpu=gpu),
        gpu=gpu,
    )


def pod(
    name: str,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    gpus: int = 0,
    namespace: str = "ml",
    node: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: str | None = "ReplicaSet",
    priority: int = 0,
    node_selector: dict[str, str] | None = None,
) -> Pod:
    requests = {"cpu": cpu, "memory": memory}
    if gpus:
        requests[wk.GPU_RESOURCE] = str(gpus)
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": requests}}],
        "priority": priority,
    }
    if node:
        spec["nodeName"] = node
    if node_selector:
        spec["nodeSelector"] = node_selector
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{name}-owner", "controller": True}]
    return Pod.from_dict(
        {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node else "Pending"}}
    )


def state_node(
    name: str,
    *,
    pool: str = "default",
    it: InstanceType | None = None,
    capacity_type: str = "on-demand",
    pods: Sequence[Pod] = (),
    created: datetime = LONG_AGO,
    initialized: bool = True,
    price: float | None = None,
    node_annotations: dict[str, str] | None = None,
    claim_annotations: dict[str, str] | None = None,
    last_pod_event: datetime | None = None,
    expire_after: str = "720h",
    deleting: bool = False,
    conditions: Sequence[dict[str, Any]] = (),
) -> StateNode:
    it = it or instance_type()
    offering = next((o for o in it.offerings if o.capacity_type == capacity_type), it.offerings[0])
    the_price = offering.price if price is None else price
    node_labels = {
        **it.labels,
        wk.NODEPOOL: pool,
        wk.CAPACITY_TYPE: capacity_type,
        wk.ZONE: offering.zone,
        wk.HOSTNAME: name,
    }
    alloc = {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in it.allocatable.items()}
    pid = f"fake:///{offering.zone}/{name}"
    node_doc: dict[str, Any] = {
        "metadata": {
            "name": name,
            "labels": node_labels,
            "annotations": node_annotations or {},
            "creationTimestamp": created.isoformat(),
        },
        "spec": {"providerID": pid},
        "status": {
            "capacity": alloc,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    if deleting:
        node_doc["metadata"]["deletionTimestamp"] = created.isoformat()
    conds = [
        {"type": "Launched", "status": "True", "lastTransitionTime": created.isoformat()},
        {"type": "Registered", "status": "True", "lastTransitionTime": created.isoformat()},
    ]
    if initialized:
        conds.append({"type": "Initialized", "status": "True", "lastTransitionTime": created.isoformat()})
    conds.extend(conditions)
    claim = NodeClaim.model_validate(
        {
            "metadata": {
                "name": name,
                "labels": {wk.NODEPOOL: pool},
                "annotations": claim_annotations or {},
                "creationTimestamp": created.isoformat(),
            },
            "spec": {
                "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
                "expireAfter": expire_after,
            },
            "status": {
                "providerID": pid,
                "nodeName": name,
                "instanceType": it.name,
                "zone": offering.zone,
                "capacityType": capacity_type,
                "pricePerHour": the_price,
                "allocatable": alloc,
                "conditions": conds,
                "lastPodEventTime": (last_pod_event or created).isoformat(),
            },
        }
    )
    bound = tuple(_bind(p, name) for p in pods)
    return StateNode(name=name, node=Node.from_dict(node_doc), claim=claim, pods=bound)


def _bind(p: Pod, node: str) -> Pod:
    raw = dict(p.raw)
    raw["spec"] = {**raw["spec"], "nodeName": node}
    raw["status"] = {"phase": "Running"}
    return Pod.from_dict(raw)


def pdb(
    name: str,
    *,
    match: dict[str, str],
    namespace: str = "ml",
    min_available: str | int | None = None,
    max_unavailable: str | int | None = None,
    disruptions_allowed: int | None = None,
) -> PodDisruptionBudget:
    spec: dict[str, Any] = {"selector": {"matchLabels": match}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    doc: dict[str, Any] = {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
    if disruptions_allowed is not None:
        doc["status"] = {"disruptionsAllowed": disruptions_allowed}
    return PodDisruptionBudget.from_dict(doc)


def snapshot(
    nodes: Sequence[StateNode],
    *,
    pools: Sequence[NodePool] = (),
    pdbs: Sequence[PodDisruptionBudget] = (),
    namespaces: dict[str, dict[str, str]] | None = None,
) -> Snapshot:
    return Snapshot(
        nodes=tuple(nodes),
        pdbs=tuple(pdbs),
        nodepools=tuple(pools) or (node_pool(),),
        namespaces=namespaces or {"ml": {wk.TEAM: "research"}},
    )
