"""Launch planning for EC2: which offerings a claim may use, in which order, as CreateFleet requests.

Pure: takes the claim, its instance types (with offerings), the resolved subnets and the launch templates,
and returns the attempts `create` makes in order (one CreateFleet `type=instant` per capacity type, cheapest
capacity type first) and reads a CreateFleet answer back into "launched" or "these offerings failed,
with these codes". The provider does the calls; nothing here performs I/O.

Why one CreateFleet per capacity type: a fleet request has one default target capacity type, and EC2
itself moves between the overrides of one request (another zone, another type) when a pool is out.
Falling from spot to on-demand therefore takes a second request within the same `create`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from provisioner.api import AWSNodeClass, NodeClaim
from provisioner.api import labels as wk
from provisioner.api.nodeclass import BlockDeviceMapping
from provisioner.api.quantities import to_base_units
from provisioner.cloudprovider import InstanceType, OfferingKey

MAX_OVERRIDES = 60
"""CreateFleet's limit on overrides per request (Karpenter uses the same bound)."""

GIB = 2**30

SPOT = wk.CAPACITY_TYPE_SPOT
ON_DEMAND = wk.CAPACITY_TYPE_ON_DEMAND


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
    rank: int
    """Position of the type in the claim's options (the scheduler's order breaks price ties)."""

    @property
    def key(self) -> OfferingKey:
        return OfferingKey(self.instance_type, self.zone, self.capacity_type)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One CreateFleet request: one capacity type, its candidates cheapest first (at most 60)."""

    capacity_type: str
    candidates: tuple[Candidate, ...]


@dataclass(slots=True)
class FleetOutcome:
    """What a CreateFleet answer said."""

    instance_id: str | None = None
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


def capacity_types_of(claim: NodeClaim) -> set[str]:
    """The capacity types the claim allows; on-demand when it says nothing (as Karpenter does)."""
    allowed, excluded = claim.allowed_values(wk.CAPACITY_TYPE)
    if allowed is None:
        allowed = {ON_DEMAND}
    return (allowed - excluded) & {SPOT, ON_DEMAND}


def pick_subnets(subnets: list[Subnet]) -> dict[str, Subnet]:
    """One subnet per zone: the one with the most free addresses (fewer address stockouts)."""
    best: dict[str, Subnet] = {}
    for s in sorted(subnets, key=lambda s: s.id):
        if s.zone not in best or s.available_ips > best[s.zone].available_ips:
            best[s.zone] = s
    return best


def candidates(
    claim: NodeClaim,
    instance_types: list[InstanceType],
    *,
    subnets: list[Subnet],
    image_keys: set[str],
) -> tuple[list[Candidate], list[OfferingKey]]:
    """(launchable candidates, offerings of the claim's options that are flagged unavailable).

    Only the claim's options (instance-type In values, in the scheduler's order) are used; every
    instance type is used when the claim lists none.
    """
    options = claim.instance_type_options()
    by_name = {it.name: it for it in instance_types}
    names = [n for n in options if n in by_name] if options else [it.name for it in instance_types]
    capacity_types = capacity_types_of(claim)
    zone_subnets = pick_subnets(subnets)
    out: list[Candidate] = []
    unavailable: list[OfferingKey] = []
    for rank, name in enumerate(names):
        it = by_name[name]
        key = image_key(it, image_keys)
        if key is None:
            continue
        for o in it.offerings:
            if o.capacity_type not in capacity_types or o.zone not in zone_subnets:
                continue
            if not claim.admits(wk.ZONE, o.zone):
                continue
            if not o.available:
                unavailable.append(OfferingKey(name, o.zone, o.capacity_type))
                continue
            out.append(
                Candidate(
                    instance_type=name,
                    zone=o.zone,
                    capacity_type=o.capacity_type,
                    price=o.price,
                    subnet_id=zone_subnets[o.zone].id,
                    image_key=key,
                    rank=rank,
                )
            )
    return out, unavailable


def plan(cands: list[Candidate]) -> list[Attempt]:
    """The CreateFleet requests to make, in order: the capacity type with the cheapest candidate first
    (spot on a tie), each with its candidates cheapest first, at most 60."""
    groups: dict[str, list[Candidate]] = {}
    for c in cands:
        groups.setdefault(c.capacity_type, []).append(c)
    attempts = []
    for capacity_type, group in groups.items():
        group.sort(key=lambda c: (c.price, c.rank, c.zone))
        attempts.append(Attempt(capacity_type, tuple(group[:MAX_OVERRIDES])))
    attempts.sort(key=lambda a: (a.candidates[0].price, a.capacity_type != SPOT))
    return attempts


def fleet_request(
    attempt: Attempt,
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


def read_fleet(
    answer: dict[str, Any],
    attempt: Attempt,
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
        out.instance_id = ids[0]
        out.launched = chosen
        break
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
) -> dict[str, Any]:
    """LaunchTemplateData for a NodeClass and one resolved AMI (`user_data` as providers.aws.bootstrap
    made it)."""
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
    if spec.associate_public_ip_address is not None:
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
