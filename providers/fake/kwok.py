"""Nodes for instances that have no real machine behind them (the fake cloud), as Karpenter's kwok
provider makes them: a Node named after the claim, with the instance type's labels, capacity and GPUs,
Ready, and tainted `provisioner.sh/unregistered` until the lifecycle controller registers it.

Pure: returns Kubernetes JSON. `provisioner run --cloud fake`, the simulator and the tests' kubelet
write it wherever their cluster lives. It lives with the fake cloud because only that cloud's instances
need a stand-in kubelet.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from provisioner.api import labels as wk
from provisioner.api import quantities
from provisioner.clock import isoformat
from provisioner.cloudprovider import Instance, InstanceType


def node_name_for(instance: Instance) -> str:
    return instance.nodeclaim or instance.provider_id.rsplit("/", 1)[-1]


def node_for_instance(
    instance: Instance,
    instance_type: InstanceType | None,
    *,
    ready: bool = True,
    devices: bool = True,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The Node a kubelet on this instance would register. `devices=False` leaves out extended resources
    (a GPU node whose device plugin never starts)."""
    name = node_name_for(instance)
    labels = dict(instance_type.labels) if instance_type is not None else {}
    labels.update(
        {
            wk.INSTANCE_TYPE: instance.instance_type,
            wk.ZONE: instance.zone,
            wk.CAPACITY_TYPE: instance.capacity_type,
            wk.HOSTNAME: name,
            **instance.labels,
        }
    )
    capacity = dict(instance_type.capacity) if instance_type is not None else {}
    allocatable = dict(instance_type.allocatable) if instance_type is not None else {}
    if not devices:
        builtin = {quantities.CPU, quantities.MEMORY, quantities.PODS, quantities.EPHEMERAL_STORAGE}
        allocatable = {k: (v if k in builtin else 0) for k, v in allocatable.items()}

    def fmt(rl: dict[str, int]) -> dict[str, str]:
        return {k: quantities.format_quantity(k, v) for k, v in sorted(rl.items())}

    stamp = isoformat(now) if now is not None else None
    condition: dict[str, Any] = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletNotReady",
    }
    if stamp:
        condition["lastTransitionTime"] = stamp
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "providerID": instance.provider_id,
            "taints": [{"key": wk.UNREGISTERED_TAINT, "effect": "NoExecute"}],
        },
        "status": {"capacity": fmt(capacity), "allocatable": fmt(allocatable), "conditions": [condition]},
    }
