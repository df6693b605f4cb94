"""How a Compute Engine instance reads: as the protocol's Instance, and as drift from its GCPNodeClass.

Pure: takes the compute_v1.Instance the provider fetched. The instance type is the catalog's name (an
n1 machine with attached GPUs reads as `n1-standard-8-t4x1`), the capacity type comes from the
scheduling model, the price from the built-in catalog, the claim and pool from the metadata written at
launch (labels as a fallback, since label values may be folded).
"""

from __future__ import annotations

import json
from datetime import datetime

from google.cloud import compute_v1

from providers.gcp import attached, naming
from providers.gcp.model import GCPNodeClass
from provisioner.api import labels as wk
from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.protocol import Instance

STATES = {
    "PROVISIONING": "pending",
    "STAGING": "pending",
    "RUNNING": "running",
    "REPAIRING": "running",
    "STOPPING": "stopping",
    "SUSPENDING": "stopping",
    "STOPPED": "stopped",
    "SUSPENDED": "stopped",
    "TERMINATED": "terminated",
}
"""Compute Engine's instance status -> the protocol's state."""


def to_instance(inst: compute_v1.Instance, *, project: str, zone: str) -> Instance:
    """The protocol's view of an instance in `zone` of `project`."""
    meta = metadata(inst)
    labels = dict(inst.labels)
    machine = naming.last(inst.machine_type)
    type_name = machine
    if inst.guest_accelerators:
        acc = inst.guest_accelerators[0]
        type_name = attached.gcp_attached_name(
            machine, naming.last(acc.accelerator_type), acc.accelerator_count
        )
    spot = inst.scheduling.provisioning_model == "SPOT" or bool(inst.scheduling.preemptible)
    reservation = labels.get(naming.LABEL_RESERVATION)
    if reservation:
        capacity_type = wk.CAPACITY_TYPE_RESERVED
    else:
        capacity_type = wk.CAPACITY_TYPE_SPOT if spot else wk.CAPACITY_TYPE_ON_DEMAND
    region = naming.region_of(zone)
    price = (
        catalog.spot_price("gcp", type_name, region)
        if spot
        else catalog.on_demand_price("gcp", type_name, region)
    )
    return Instance(
        provider_id=naming.provider_id(project, zone, inst.name),
        instance_type=type_name,
        zone=zone,
        capacity_type=capacity_type,
        price=0.0 if reservation else price or 0.0,
        state=STATES.get(inst.status, inst.status.lower() if inst.status else "unknown"),
        nodeclaim=meta.get(naming.META_NODECLAIM)
        or _member(meta, inst.name)
        or labels.get(naming.LABEL_NODECLAIM),
        nodepool=meta.get(naming.META_NODEPOOL) or labels.get(naming.LABEL_NODEPOOL),
        launched_at=parse_time(inst.creation_timestamp),
        image_id=meta.get(naming.META_IMAGE),
        tags=labels,
        reservation_id=reservation or None,
        reservation_type=wk.RESERVATION_TYPE_DEFAULT if reservation else None,
        placement_group=naming.last(inst.resource_policies[0]) if inst.resource_policies else None,
        labels=topology_labels(inst),
    )


TOPOLOGY_LABELS = {
    "block": "cloud.google.com/gce-topology-block",
    "subblock": "cloud.google.com/gce-topology-subblock",
    "host": "cloud.google.com/gce-topology-host",
}
"""`resourceStatus.physicalHostTopology` fields -> the node labels GKE gives them."""


def topology_labels(inst: compute_v1.Instance) -> dict[str, str]:
    """The network-topology labels of an instance, where Compute Engine reports its physical host."""
    if "resource_status" not in inst or "physical_host_topology" not in inst.resource_status:
        return {}
    topology = inst.resource_status.physical_host_topology
    return {
        label: getattr(topology, field)
        for field, label in TOPOLOGY_LABELS.items()
        if getattr(topology, field)
    }


def _member(meta: dict[str, str], name: str) -> str | None:
    """The claim of an instance of a bulkInsert, from the members map all of them share."""
    try:
        members = json.loads(meta.get(naming.META_GANG_MEMBERS) or "{}")
    except ValueError:
        return None
    claim = members.get(name) if isinstance(members, dict) else None
    return str(claim) if claim else None


def drift(inst: compute_v1.Instance, node_class: GCPNodeClass) -> str | None:
    """Why the instance no longer matches the node class (image, network, subnetwork), or None."""
    spec = node_class.spec
    image = metadata(inst).get(naming.META_IMAGE)
    if image is not None and image != spec.image:
        return f"ImageDrift: instance booted {image}, node class wants {spec.image}"
    nic = inst.network_interfaces[0] if inst.network_interfaces else None
    if nic is None:
        return None
    if nic.network and naming.last(nic.network) != naming.last(spec.network):
        return f"NetworkDrift: instance is on {naming.last(nic.network)}, node class wants {spec.network}"
    if spec.subnetwork and nic.subnetwork and naming.last(nic.subnetwork) != naming.last(spec.subnetwork):
        return f"SubnetworkDrift: instance is on {naming.last(nic.subnetwork)}, node class wants {spec.subnetwork}"
    return None


def metadata(inst: compute_v1.Instance) -> dict[str, str]:
    return {item.key: item.value for item in inst.metadata.items} if inst.metadata else {}


def parse_time(value: str) -> datetime | None:
    """An RFC 3339 timestamp of the API, or None when empty or unreadable."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
