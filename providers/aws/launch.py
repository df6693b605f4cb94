"""Launch planning for EC2: the claim's offerings in the shared launch order, as CreateFleet requests.

Pure: takes the claim, its instance types (with offerings), the resolved subnets and the launch templates,
and returns the attempts `create` makes in order, and reads a CreateFleet answer back into "launched" or
"these offerings failed, with these codes". Which offerings and in which order is
provisioner.cloudprovider.launch_order's (the same on every cloud); this module keeps the offerings it
can boot (a subnet in the zone, an AMI for the architecture) and cuts the order into CreateFleet
requests. The provider does the calls; nothing here performs I/O.

Why one CreateFleet per run of one capacity type: a fleet request has one default target capacity
type, and EC2 itself moves between the overrides of one request (another zone, another type) when a
pool is out. Falling from spot to on-demand therefore takes another request within the same `create`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from providers.aws import efa
from providers.aws.model import AWSNodeClass, BlockDeviceMapping
from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.api.quantities import to_base_units
from provisioner.cloudprovider import InstanceType, OfferingKey
from provisioner.cloudprovider.launch_order import group_launch_order, launch_order

MAX_OVERRIDES = 60
"""CreateFleet's limit on overrides per request (Karpenter uses the same bound)."""

GIB = 2**30

SPOT = wk.CAPACITY_TYPE_SPOT
ON_DEMAND = wk.CAPACITY_TYPE_ON_DEMAND
RESERVED = wk.CAPACITY_TYPE_RESERVED

LAUNCHABLE = frozenset({SPOT, ON_DEMAND, RESERVED})
"""What `create` can buy: spot and on-demand through CreateFleet, reserved through RunInstances aimed at
one capacity reservation (see `reserved_request`)."""


@dataclass(frozen=True, slots=True)
class Subnet:
    id: str
    zone: str
    available_ips: int = 0


@dataclass(frozen=True, slots=True)
class Candidate:
    """One offering the claim may launch: type, zone, capacity type, price, the subnet to use, and the
    image key (which AMI of the NodeClass it boots, see `image_key`)."""

    instance_type: str
    zone: str
    capacity_type: str
    price: float
    subnet_id: str
    image_key: str
    reservation_id: str = ""
    """For a reserved candidate: the capacity reservation it launches into."""
    reservation_type: str = ""
    """`default` or `capacity-block`, with `reservation_id`."""

    @property
    def key(self) -> OfferingKey:
        return OfferingKey(self.instance_type, self.zone, self.capacity_type, self.reservation_id)


@dataclass(frozen=True, slots=True)
class FleetAttempt:
    """One CreateFleet request: one capacity type, its candidates in the launch order (at most 60)."""

    capacity_type: str
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """The requests of one `create`, and the offerings the claim allows that were flagged unavailable."""

    attempts: tuple[FleetAttempt, ...]
    unavailable: tuple[OfferingKey, ...] = ()

    @property
    def image_keys(self) -> set[str]:
        """The NodeClass images the requests boot (one launch template each)."""
        return {c.image_key for a in self.attempts for c in a.candidates}


@dataclass(slots=True)
class FleetOutcome:
    """What a CreateFleet answer said."""

    instance_id: str | None = None
    instance_ids: list[str] = field(default_factory=list)
    """Every instance launched (a group fleet launches several), the first being `instance_id`."""
    launched: Candidate | None = None
    capacity_failures: list[tuple[OfferingKey, str]] = field(default_factory=list)
    """(offering, error code) for every override EC2 reported a capacity error for."""
    other_errors: list[str] = field(default_factory=list)
    """`code: message` of errors retrying another offering will not fix."""


NVIDIA_VARIANT = "nvidia"


def image_key(it: InstanceType, available: set[str]) -> str | None:
    """Which of the NodeClass's images a type boots: `ARCH/nvidia` (an accelerated AMI from an alias)
    for NVIDIA GPU types when there is one, else `ARCH`; None when the NodeClass has no image for it."""
    arch = it.labels.get(wk.ARCH, "amd64")
    if it.gpu is not None and it.gpu.manufacturer == "nvidia" and f"{arch}/{NVIDIA_VARIANT}" in available:
        return f"{arch}/{NVIDIA_VARIANT}"
    return arch if arch in available else None


def pick_subnets(subnets: list[Subnet]) -> dict[str, Subnet]:
    """One subnet per zone: the one with the most free addresses (fewer address stockouts)."""
    best: dict[str, Subnet] = {}
    for s in sorted(subnets, key=lambda s: s.id):
        if s.zone not in best or s.available_ips > best[s.zone].available_ips:
            best[s.zone] = s
    return best


def plan(
    claim: NodeClaim,
    instance_types: list[InstanceType],
    *,
    subnets: list[Subnet],
    image_keys: set[str],
    group: Sequence[NodeClaim] = (),
    zone: str | None = None,
    capacity_types: frozenset[str] = LAUNCHABLE,
    efa_interfaces: dict[str, int] | None = None,
) -> LaunchPlan:
    """The CreateFleet requests to make, in order: the claim's offerings in the launch order, cut where
    the capacity type changes, each request the first 60 of its run. With `group` (the members of one
    gang, `claim` among them), the offerings every member allows, in `zone` when given, each for the
    whole group (provisioner.cloudprovider.launch_order.group_launch_order).

    Only offerings in a zone with a subnet, of a capacity type a fleet can buy, of a type the NodeClass
    has an image for, are candidates. `efa_interfaces` (type -> count, the NodeClass asking for EFA)
    marks each type's image key with its EFA interfaces (providers.aws.efa).
    """
    zone_subnets = pick_subnets(subnets)
    keys = {it.name: image_key(it, image_keys) for it in instance_types}
    for name, count in (efa_interfaces or {}).items():
        if keys.get(name) is not None:
            keys[name] = efa.image_key(keys[name] or "", count)
    bootable = [it for it in instance_types if keys[it.name] is not None]
    if group:
        order = group_launch_order(
            group, bootable, zone=zone, zones=zone_subnets.keys(), capacity_types=capacity_types
        )
    else:
        order = launch_order(claim, bootable, zones=zone_subnets.keys(), capacity_types=capacity_types)
    attempts = tuple(
        FleetAttempt(
            capacity_type,
            tuple(
                Candidate(
                    instance_type=a.instance_type.name,
                    zone=a.zone,
                    capacity_type=a.capacity_type,
                    price=a.price,
                    subnet_id=zone_subnets[a.zone].id,
                    image_key=keys[a.instance_type.name] or "",
                    reservation_id=a.offering.reservation.id if a.offering.reservation else "",
                    reservation_type=a.offering.reservation.kind if a.offering.reservation else "",
                )
                for a in run[:MAX_OVERRIDES]
            ),
        )
        for capacity_type, run in order.phases()
    )
    return LaunchPlan(attempts=attempts, unavailable=order.unavailable)


def fleet_request(
    attempt: FleetAttempt,
    *,
    launch_templates: dict[str, str],
    tags: dict[str, str],
) -> dict[str, Any]:
    """CreateFleet's parameters for one attempt. `launch_templates` maps image key to template name."""
    configs = []
    for key, lt_name in sorted(launch_templates.items()):
        overrides = [
            {"InstanceType": c.instance_type, "SubnetId": c.subnet_id, "Priority": float(i)}
            for i, c in enumerate(attempt.candidates)
            if c.image_key == key
        ]
        if overrides:
            configs.append(
                {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": lt_name, "Version": "$Latest"},
                    "Overrides": overrides,
                }
            )
    request: dict[str, Any] = {
        "Type": "instant",
        "LaunchTemplateConfigs": configs,
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": attempt.capacity_type,
        },
        "TagSpecifications": [{"ResourceType": "instance", "Tags": tag_list(tags)}],
    }
    if attempt.capacity_type == SPOT:
        request["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    else:
        request["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
    return request


def reserved_request(
    candidate: Candidate,
    *,
    launch_templates: dict[str, str],
    tags: dict[str, str],
    client_token: str,
) -> dict[str, Any]:
    """RunInstances' parameters for one reserved candidate: aimed at its capacity reservation (a
    Capacity Block also needs the `capacity-block` market type), tagged with the reservation so a node
    read back from DescribeInstances still says where it runs. One instance, one reservation: a full
    reservation fails this call only."""
    reservation_tags = {
        wk.CAPACITY_RESERVATION_ID: candidate.reservation_id,
        wk.CAPACITY_RESERVATION_TYPE: candidate.reservation_type or wk.RESERVATION_TYPE_DEFAULT,
    }
    request: dict[str, Any] = {
        "LaunchTemplate": {
            "LaunchTemplateName": launch_templates[candidate.image_key],
            "Version": "$Latest",
        },
        "InstanceType": candidate.instance_type,
        "SubnetId": candidate.subnet_id,
        "MinCount": 1,
        "MaxCount": 1,
        "ClientToken": client_token,
        "CapacityReservationSpecification": {
            "CapacityReservationTarget": {"CapacityReservationId": candidate.reservation_id}
        },
        "TagSpecifications": [{"ResourceType": "instance", "Tags": tag_list({**tags, **reservation_tags})}],
    }
    if candidate.reservation_type == wk.RESERVATION_TYPE_CAPACITY_BLOCK:
        request["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    return request


def read_fleet(
    answer: dict[str, Any],
    attempt: FleetAttempt,
    *,
    zone_of_subnet: dict[str, str],
    capacity_codes: frozenset[str],
) -> FleetOutcome:
    """Read a CreateFleet answer: the launched instance and candidate, or the failures by offering."""
    by_override: dict[tuple[Any, Any], Candidate] = {
        (c.instance_type, c.subnet_id): c for c in attempt.candidates
    }
    out = FleetOutcome()
    for inst in answer.get("Instances") or []:
        ids = inst.get("InstanceIds") or []
        if not ids:
            continue
        overrides = (inst.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
        type_name = inst.get("InstanceType") or overrides.get("InstanceType")
        chosen = by_override.get((type_name, overrides.get("SubnetId")))
        if chosen is None:
            chosen = next((c for c in attempt.candidates if c.instance_type == type_name), None)
        if out.instance_id is None:
            out.instance_id = ids[0]
            out.launched = chosen
        out.instance_ids.extend(str(i) for i in ids)
    for err in answer.get("Errors") or []:
        code = str(err.get("ErrorCode", ""))
        overrides = (err.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
        if code in capacity_codes:
            zone = overrides.get("AvailabilityZone") or zone_of_subnet.get(overrides.get("SubnetId", ""), "")
            lifecycle = err.get("Lifecycle") or attempt.capacity_type
            type_name = overrides.get("InstanceType")
            if type_name and zone:
                out.capacity_failures.append(
                    (OfferingKey(str(type_name), str(zone), str(lifecycle).replace("_", "-")), code)
                )
            else:
                # EC2 named no offering: every override of the request shares the failure.
                out.capacity_failures.extend((c.key, code) for c in attempt.candidates)
        else:
            out.other_errors.append(f"{code}: {err.get('ErrorMessage', '')}".rstrip(": "))
    return out


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def tag_dict(tags: list[dict[str, Any]] | None) -> dict[str, str]:
    return {str(t["Key"]): str(t.get("Value", "")) for t in tags or [] if "Key" in t}


def cluster_tags(cluster_name: str) -> dict[str, str]:
    """Tags that say "this cluster's provisioner owns it"."""
    return {wk.CLUSTER: cluster_name, f"kubernetes.io/cluster/{cluster_name}": "owned"}


def instance_tags(claim: NodeClaim, node_class: AWSNodeClass, *, cluster_name: str) -> dict[str, str]:
    """The tags tying an instance to its NodeClaim, NodePool, NodeClass and cluster."""
    tags = dict(node_class.spec.tags)
    tags.update(cluster_tags(cluster_name))
    tags[wk.NODECLAIM] = claim.name
    tags[f"{wk.GROUP}/nodeclass"] = node_class.name
    tags["Name"] = claim.name
    if claim.nodepool:
        tags[wk.NODEPOOL] = claim.nodepool
    return tags


def block_devices(mappings: list[BlockDeviceMapping]) -> list[dict[str, Any]]:
    """The NodeClass's block devices as launch template BlockDeviceMappings (sizes in whole GiB)."""
    out = []
    for m in mappings:
        ebs: dict[str, Any] = {}
        e = m.ebs
        if e.volume_size:
            size = to_base_units("storage", e.volume_size)
            ebs["VolumeSize"] = max(1, -(-size // GIB))
        if e.volume_type:
            ebs["VolumeType"] = e.volume_type
        if e.iops is not None:
            ebs["Iops"] = e.iops
        if e.throughput is not None:
            ebs["Throughput"] = e.throughput
        if e.encrypted is not None:
            ebs["Encrypted"] = e.encrypted
        if e.kms_key_id:
            ebs["KmsKeyId"] = e.kms_key_id
        if e.delete_on_termination is not None:
            ebs["DeleteOnTermination"] = e.delete_on_termination
        if e.snapshot_id:
            ebs["SnapshotId"] = e.snapshot_id
        out.append({"DeviceName": m.device_name, "Ebs": ebs})
    return out


def launch_template_data(
    node_class: AWSNodeClass,
    *,
    image_id: str,
    security_group_ids: list[str],
    instance_profile: str,
    cluster_name: str,
    user_data: str | None,
    efa_interfaces: int = 0,
) -> dict[str, Any]:
    """LaunchTemplateData for a NodeClass and one resolved AMI (`user_data` as providers.aws.bootstrap
    made it), with `efa_interfaces` EFA network interfaces (providers.aws.efa)."""
    spec = node_class.spec
    md = spec.metadata_options
    data: dict[str, Any] = {
        "ImageId": image_id,
        "IamInstanceProfile": {"Name": instance_profile},
        "MetadataOptions": {
            "HttpEndpoint": md.http_endpoint,
            "HttpProtocolIpv6": md.http_protocol_ipv6,
            "HttpPutResponseHopLimit": md.http_put_response_hop_limit,
            "HttpTokens": md.http_tokens,
        },
        "Monitoring": {"Enabled": spec.detailed_monitoring},
        "TagSpecifications": [
            {
                "ResourceType": "volume",
                "Tags": tag_list({**spec.tags, **cluster_tags(cluster_name)}),
            }
        ],
    }
    if efa_interfaces > 0:
        data["NetworkInterfaces"] = efa.network_interfaces(
            efa_interfaces,
            security_group_ids=security_group_ids,
            public_ip=spec.associate_public_ip_address,
        )
    elif spec.associate_public_ip_address is not None:
        # Subnet comes from the fleet override; the interface carries the groups and the address choice.
        data["NetworkInterfaces"] = [
            {
                "DeviceIndex": 0,
                "AssociatePublicIpAddress": spec.associate_public_ip_address,
                "Groups": security_group_ids,
            }
        ]
    else:
        data["SecurityGroupIds"] = security_group_ids
    if spec.block_device_mappings:
        data["BlockDeviceMappings"] = block_devices(spec.block_device_mappings)
    if user_data:
        data["UserData"] = base64.b64encode(user_data.encode()).decode()
    return data


def template_name(cluster_name: str, node_class: AWSNodeClass, data: dict[str, Any]) -> str:
    """A launch template name unique to the NodeClass and what it resolved to: a changed spec or AMI
    gives a new template, so launches never race an in-place template update."""
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    return f"provisioner/{cluster_name}/{node_class.name}/{digest}"[:128]
