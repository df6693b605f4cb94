"""Launch planning for Compute Engine: which offerings a claim may use, in which order, and the
instances.insert body for one of them.

Pure: takes the claim, its instance types, the GCPNodeClass and what the provider remembers of recent
stockouts, and returns the attempts `create` makes one insert at a time: the shared launch order
(provisioner.cloudprovider.launch_order: reserved, then the cheapest of spot and on-demand, so a spot
stockout falls to the next zone, then to on-demand) within the node class's zones of the region. Also
what a quota error rules out (quotas are regional) and the instance an attempt becomes (labels,
metadata, disks, network, scheduling, accelerators). The provider makes the calls and waits.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from google.cloud import compute_v1

from providers.gcp import machines, naming
from providers.gcp.model import GCPNodeClass
from provisioner.api import labels as wk
from provisioner.api import mig
from provisioner.api.nodeclaim import NodeClaim
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.launch_order import Attempt, LaunchOrder, launch_order
from provisioner.cloudprovider.types import InstanceType

LAUNCHABLE = frozenset({wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND, wk.CAPACITY_TYPE_RESERVED})
"""What an insert can buy today; reserved offerings need the instance's reservation affinity first."""


def order(
    claim: NodeClaim,
    instance_types: Sequence[InstanceType],
    *,
    node_class: GCPNodeClass,
    region: str,
    recently_out: Collection[OfferingKey] = (),
) -> LaunchOrder:
    """The claim's offerings in the launch order, in the zones of `region` the node class allows,
    skipping those flagged unavailable and those `recently_out`."""
    zones = {o.zone for it in instance_types for o in it.offerings if naming.region_of(o.zone) == region}
    if node_class.spec.zones:
        zones &= set(node_class.spec.zones)
    return launch_order(
        claim, instance_types, zones=zones, capacity_types=LAUNCHABLE, unavailable=recently_out
    )


def quota_scope(attempt: Attempt) -> list[OfferingKey]:
    """The offerings a quota error on `attempt` rules out too: Compute Engine quotas are regional, so
    every zone of the type at that capacity type would say the same."""
    return [
        OfferingKey(attempt.instance_type.name, o.zone, o.capacity_type)
        for o in attempt.instance_type.offerings
        if o.capacity_type == attempt.capacity_type
    ]


def instance_body(
    name: str,
    *,
    claim: NodeClaim,
    attempt: Attempt,
    node_class: GCPNodeClass,
    machine: machines.MachineLaunch,
    cluster_name: str,
    region: str,
) -> compute_v1.Instance:
    """The instances.insert body launching `attempt` for the claim: `machine` says the machine type and
    what to attach; labels and metadata tie the instance to its cluster, pool and claim."""
    spec = node_class.spec
    zone = attempt.zone
    spot = attempt.capacity_type == wk.CAPACITY_TYPE_SPOT
    has_gpu = machine.gpu or attempt.instance_type.gpu is not None
    nodepool = claim.nodepool or ""
    gce_labels = {k: naming.label_value(v) for k, v in spec.labels.items()}
    gce_labels.update(
        {
            naming.LABEL_CLUSTER: naming.label_value(cluster_name),
            naming.LABEL_NODEPOOL: naming.label_value(nodepool),
            naming.LABEL_NODECLAIM: naming.label_value(claim.name),
            naming.LABEL_CAPACITY_TYPE: attempt.capacity_type,
        }
    )
    reservation = attempt.offering.reservation
    if reservation is not None:
        gce_labels[naming.LABEL_RESERVATION] = naming.label_value(reservation.id)
    metadata = dict(spec.metadata)
    metadata.update(
        {
            naming.META_CLUSTER: cluster_name,
            naming.META_NODEPOOL: nodepool,
            naming.META_NODECLAIM: claim.name,
            naming.META_IMAGE: spec.image,
        }
    )
    layout = claim.metadata.labels.get(mig.MIG_CONFIG_LABEL)
    if layout:
        metadata[naming.META_NODE_LABELS] = f"{mig.MIG_CONFIG_LABEL}={layout}"
    init = compute_v1.AttachedDiskInitializeParams(
        source_image=spec.image,
        disk_size_gb=spec.boot_disk.size_gb,
        disk_type=f"zones/{zone}/diskTypes/{spec.boot_disk.type}",
        labels=gce_labels,
    )
    boot = compute_v1.AttachedDisk(boot=True, auto_delete=True, type_="PERSISTENT", initialize_params=init)
    if spec.boot_disk.kms_key:
        boot.disk_encryption_key = compute_v1.CustomerEncryptionKey(kms_key_name=spec.boot_disk.kms_key)
    disks = [boot]
    for _ in range(spec.local_ssd_count):
        disks.append(
            compute_v1.AttachedDisk(
                type_="SCRATCH",
                interface="NVME",
                auto_delete=True,
                initialize_params=compute_v1.AttachedDiskInitializeParams(
                    disk_type=f"zones/{zone}/diskTypes/local-ssd"
                ),
            )
        )
    nic = compute_v1.NetworkInterface(network=_network_url(spec.network))
    if spec.subnetwork:
        nic.subnetwork = _subnetwork_url(spec.subnetwork, region)
    scheduling = compute_v1.Scheduling()
    if spot:
        # Spot VMs must not migrate; DELETE so a preempted node does not linger (and cost disk) as
        # TERMINATED: the claim is replaced anyway.
        scheduling.provisioning_model = "SPOT"
        scheduling.instance_termination_action = "DELETE"
        scheduling.automatic_restart = False
        scheduling.on_host_maintenance = "TERMINATE"
    elif has_gpu:
        # GPUs cannot live-migrate: host maintenance stops the VM, which then restarts.
        scheduling.on_host_maintenance = "TERMINATE"
        scheduling.automatic_restart = True
    body = compute_v1.Instance(
        name=name,
        machine_type=f"zones/{zone}/machineTypes/{machine.machine_type}",
        disks=disks,
        network_interfaces=[nic],
        labels=gce_labels,
        metadata=compute_v1.Metadata(
            items=[compute_v1.Items(key=k, value=v) for k, v in sorted(metadata.items())]
        ),
        scheduling=scheduling,
        description=f"provisioner {cluster_name} nodeclaim {claim.name}",
    )
    if reservation is not None:
        # Into this reservation only: a full one fails the insert, and the next offering is tried.
        body.reservation_affinity = compute_v1.ReservationAffinity(
            consume_reservation_type="SPECIFIC_RESERVATION",
            key="compute.googleapis.com/reservation-name",
            values=[reservation.id],
        )
    elif spec.reservations is not None and attempt.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND:
        # The node class manages its reservations: an on-demand launch must not silently use one
        # (Compute Engine's default), or a reservation counted free would be taken behind our back.
        body.reservation_affinity = compute_v1.ReservationAffinity(consume_reservation_type="NO_RESERVATION")
    if spec.network_tags:
        body.tags = compute_v1.Tags(items=list(spec.network_tags))
    if spec.service_account is not None:
        body.service_accounts = [
            compute_v1.ServiceAccount(
                email=spec.service_account.email, scopes=list(spec.service_account.scopes)
            )
        ]
    if machine.accelerator_type:
        body.guest_accelerators = [
            compute_v1.AcceleratorConfig(
                accelerator_type=f"zones/{zone}/acceleratorTypes/{machine.accelerator_type}",
                accelerator_count=machine.accelerator_count,
            )
        ]
    return body


def _network_url(network: str) -> str:
    return network if "/" in network else f"global/networks/{network}"


def _subnetwork_url(subnetwork: str, region: str) -> str:
    return subnetwork if "/" in subnetwork else f"regions/{region}/subnetworks/{subnetwork}"
