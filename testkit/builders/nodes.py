"""Builders for capacity that exists or is asked for: nodes, the scheduler's snapshot of nodes and their
pods, nodes with their claims as the disruption planner reads them (`state_node`, `state_snapshot`), and
NodeClaims as the provisioning controller writes them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from provisioner.api import NodeClaim, NodePool
from provisioner.api import labels as wk
from provisioner.api.common import NodeClassReference, ObjectMeta, Operator, Requirement
from provisioner.api.nodeclaim import NodeClaimSpec
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider.types import InstanceType
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import DaemonSet, Node, Pod, PodDisruptionBudget
from testkit.builders.common import LONG_AGO
from testkit.builders.pools import instance_type


def node(
    name: str = "node-1",
    *,
    cpu: int = 4,
    memory_gib: int = 16,
    pods_cap: int = 110,
    gpus: int = 0,
    zone: str = "zone-a",
    pool: str | None = "default",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    cordoned: bool = False,
    instance: str = "m.xlarge",
    capacity_type: str = "on-demand",
) -> Node:
    alloc = {"cpu": str(cpu), "memory": f"{memory_gib}Gi", "pods": str(pods_cap)}
    if gpus:
        alloc[wk.GPU_RESOURCE] = str(gpus)
    all_labels = {
        wk.ZONE: zone,
        wk.HOSTNAME: name,
        wk.INSTANCE_TYPE: instance,
        wk.CAPACITY_TYPE: capacity_type,
    }
    if pool:
        all_labels[wk.NODEPOOL] = pool
    all_labels.update(labels or {})
    return Node.from_dict(
        {
            "metadata": {"name": name, "labels": all_labels},
            "spec": {"taints": [dict(t) for t in taints], "unschedulable": cordoned},
            "status": {"capacity": alloc, "allocatable": alloc},
        }
    )


def snapshot(
    nodes: Sequence[tuple[Node, Sequence[Pod]]] = (), daemonsets: Sequence[DaemonSet] = ()
) -> Snapshot:
    return Snapshot(
        nodes=tuple(StateNode(name=n.name, node=n, pods=tuple(p)) for n, p in nodes),
        daemonsets=tuple(daemonsets),
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
    labels: dict[str, str] | None = None,
) -> StateNode:
    """A Ready node of `it` (default `instance_type()`) with its Launched and Registered (and Initialized)
    claim, priced by its offering of `capacity_type`, and `pods` bound to it; `labels` are added to the
    node's."""
    it = it or instance_type()
    offering = next((o for o in it.offerings if o.capacity_type == capacity_type), it.offerings[0])
    the_price = offering.price if price is None else price
    node_labels = {
        **it.labels,
        wk.NODEPOOL: pool,
        wk.CAPACITY_TYPE: capacity_type,
        wk.ZONE: offering.zone,
        wk.HOSTNAME: name,
        **(labels or {}),
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
    raw["status"] = {**(raw.get("status") or {}), "phase": "Running"}
    return Pod.from_dict(raw)


def state_snapshot(
    nodes: Sequence[StateNode],
    *,
    pools: Sequence[NodePool] = (),
    pdbs: Sequence[PodDisruptionBudget] = (),
    namespaces: dict[str, dict[str, str]] | None = None,
) -> Snapshot:
    """A snapshot of nodes with claims (`state_node`), as the planner reads it; `snapshot` is the
    scheduler's (bare nodes and their pods)."""
    return Snapshot(
        nodes=tuple(nodes),
        pdbs=tuple(pdbs),
        nodepools=tuple(pools),
        namespaces=namespaces or {},
    )


def node_claim(
    name: str = "c",
    options: Sequence[str] | None = None,
    *,
    node_class: NodeClass | None = None,
    capacity_types: Sequence[str] | None = (wk.CAPACITY_TYPE_ON_DEMAND,),
    zones: Sequence[str] | None = None,
    not_zones: Sequence[str] | None = None,
    nodepool: str | None = "default",
) -> NodeClaim:
    """A NodeClaim as the provisioning controller writes it: options cheapest first, capacity types and
    zones as requirements (None: no requirement, any value); `node_class` None refers to AWSNodeClass
    `default`."""
    requirements = []
    if options is not None:
        requirements.append(Requirement(key=wk.INSTANCE_TYPE, operator=Operator.IN, values=list(options)))
    if capacity_types is not None:
        requirements.append(
            Requirement(key=wk.CAPACITY_TYPE, operator=Operator.IN, values=list(capacity_types))
        )
    if zones:
        requirements.append(Requirement(key=wk.ZONE, operator=Operator.IN, values=list(zones)))
    if not_zones is not None:
        requirements.append(Requirement(key=wk.ZONE, operator=Operator.NOT_IN, values=list(not_zones)))
    ref = (
        NodeClassReference(kind=node_class.kind, name=node_class.name)
        if node_class is not None
        else NodeClassReference(kind="AWSNodeClass", name="default")
    )
    return NodeClaim(
        metadata=ObjectMeta(name=name, labels={wk.NODEPOOL: nodepool} if nodepool else {}),
        spec=NodeClaimSpec(node_class_ref=ref, requirements=requirements),
    )
