"""The AWSNodeClass model (`provisioner.sh/v1`): Karpenter's EC2NodeClass shape, with its selector terms,
block devices, metadata options, placement and the status the provider resolves. The AWS plug-in
(providers.aws.plugin) declares it; the core reaches it only through the registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from provisioner.api import labels, quantities
from provisioner.api.common import Condition, FieldError, Model, ObjectMeta, cel_rules, raise_all
from provisioner.api.nodeclass import NodeClass


class SelectorTerm(Model):
    """Select a cloud object by `id`, by `name` or by `tags` (all tags must match; `*` matches any value)."""

    model_config = cel_rules(
        (
            "has(self.id) || has(self.name) || has(self.tags) || has(self.alias)",
            "a selector term needs one of id, name, tags or alias",
        ),
        (
            "has(self.id) ? !(has(self.tags) || has(self.name) || has(self.alias)) : true",
            "id selects one object: do not combine it with tags, name or alias",
        ),
        (
            "has(self.alias) ? !(has(self.tags) || has(self.name)) : true",
            "alias selects a family: do not combine it with tags or name",
        ),
    )

    id: str | None = None
    """The object's id (`subnet-0abc`, `sg-0abc`, `ami-0abc`). Excludes `tags` and `name`."""
    name: str | None = None
    """The object's name (security group or AMI name)."""
    tags: dict[str, str] | None = None
    """Tags that must all be present; value `*` matches any value."""
    owner: str | None = None
    """For AMIs: the owner account id or alias (`self`, `amazon`)."""
    alias: str | None = None
    """For AMIs: a family alias such as `al2023@latest` or `bottlerocket@v1.20`."""

    @model_validator(mode="after")
    def _one_way(self) -> SelectorTerm:
        ways = [w for w in (self.id, self.name, self.tags, self.alias) if w]
        if not ways:
            raise ValueError("a selector term needs one of id, name, tags or alias")
        if self.id and (self.tags or self.name or self.alias):
            raise ValueError("id selects one object: do not combine it with tags, name or alias")
        if self.alias and (self.tags or self.name):
            raise ValueError("alias selects a family: do not combine it with tags or name")
        return self


class CapacityReservationSelectorTerm(Model):
    """Select EC2 capacity reservations (On-Demand Capacity Reservations and Capacity Blocks) by `id`,
    or by `tags` and/or `ownerID`. Only active reservations are used."""

    model_config = cel_rules(
        (
            "has(self.id) || has(self.tags) || has(self.ownerID)",
            "a capacity reservation selector term needs id, tags or ownerID",
        ),
        (
            "has(self.id) ? !(has(self.tags) || has(self.ownerID)) : true",
            "id selects one reservation: do not combine it with tags or ownerID",
        ),
    )

    id: str | None = None
    """The reservation's id (`cr-0abc`). Excludes `tags` and `ownerID`."""
    tags: dict[str, str] | None = None
    """Tags that must all be present; value `*` matches any value."""
    owner_id: str | None = Field(default=None, alias="ownerID")
    """The account that owns the reservation (a reservation shared with this account)."""

    @model_validator(mode="after")
    def _one_way(self) -> CapacityReservationSelectorTerm:
        if not (self.id or self.tags or self.owner_id):
            raise ValueError("a capacity reservation selector term needs id, tags or ownerID")
        if self.id and (self.tags or self.owner_id):
            raise ValueError("id selects one reservation: do not combine it with tags or ownerID")
        return self


def _check_volume_size(value: str) -> str:
    try:
        size = quantities.parse_quantity(value)
    except quantities.QuantityError as err:
        raise ValueError(str(err)) from None
    if size < 0:
        raise ValueError(f"{value!r} is negative; a volume size must be more than 0, e.g. 100Gi")
    if size == 0:
        raise ValueError("a volume size must be more than 0, e.g. 100Gi")
    return value


class EBS(Model):
    """An EBS volume."""

    volume_size: (
        Annotated[
            str,
            AfterValidator(_check_volume_size),
            Field(json_schema_extra={"pattern": r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$"}),
        ]
        | None
    ) = None
    """Size as a quantity (`100Gi`), more than 0."""
    volume_type: Literal["standard", "io1", "io2", "gp2", "gp3", "sc1", "st1"] | None = "gp3"
    """Volume type. Default `gp3`."""
    iops: int | None = Field(default=None, ge=0)
    """Provisioned IOPS (io1, io2, gp3)."""
    throughput: int | None = Field(default=None, ge=0)
    """Throughput in MiB/s (gp3)."""
    encrypted: bool | None = True
    """Encrypt the volume. Default true."""
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")
    """KMS key for encryption; default the account's EBS key."""
    delete_on_termination: bool | None = True
    """Delete with the instance. Default true."""
    snapshot_id: str | None = Field(default=None, alias="snapshotID")
    """Snapshot to create the volume from."""


class BlockDeviceMapping(Model):
    """A block device of the instance."""

    device_name: str
    """Device name, e.g. `/dev/xvda`."""
    ebs: EBS = Field(default_factory=EBS)
    """The EBS volume."""
    root_volume: bool = False
    """This is the root volume."""


class MetadataOptions(Model):
    """Instance metadata service settings."""

    http_endpoint: Literal["enabled", "disabled"] = "enabled"
    """IMDS on or off. Default `enabled`."""
    http_protocol_ipv6: Literal["enabled", "disabled"] = Field("disabled", alias="httpProtocolIPv6")
    """IMDS over IPv6. Default `disabled`."""
    http_put_response_hop_limit: int = Field(1, ge=1, le=64)
    """Hop limit for IMDS PUT responses. Default 1 (pods cannot reach IMDS)."""
    http_tokens: Literal["required", "optional"] = "required"
    """IMDSv2 tokens. Default `required`."""


class AWSPlacement(Model):
    """How the nodes of one gang are kept in one network island: a cluster placement group (an existing
    one by name, or one the provisioner creates per gang and deletes when the gang's nodes are gone) and
    EFA network interfaces. A gang is always launched in one zone, with or without this."""

    group_name: str | None = Field(default=None, min_length=1, max_length=255)
    """An existing cluster placement group to launch every gang of the pool into, by name. Excludes
    `groupPerGang`."""
    group_per_gang: bool = False
    """Create a cluster placement group for each gang (tagged as the provisioner's, named after the
    gang), launch its nodes into it, and delete it once they are gone. Excludes `groupName`."""
    efa: bool = False
    """Give instances of types that support it EFA network interfaces (`InterfaceType: efa`, as many as
    the type allows); their nodes offer the `vpc.amazonaws.com/efa` extended resource, requested by pods
    like GPUs. Types without EFA launch with their usual interface."""

    @model_validator(mode="after")
    def _one_group(self) -> AWSPlacement:
        if self.group_name and self.group_per_gang:
            raise ValueError("give groupName (an existing placement group) or groupPerGang, not both")
        return self


class AWSNodeClassSpec(Model):
    """How to launch an EC2 instance."""

    model_config = cel_rules(
        ("has(self.role) != has(self.instanceProfile)", "give exactly one of role or instanceProfile"),
    )

    subnet_selector_terms: list[SelectorTerm] = Field(min_length=1, max_length=30)
    """Subnets to launch into, by id or tags; their zones are the zones the pool can use."""
    security_group_selector_terms: list[SelectorTerm] = Field(min_length=1, max_length=30)
    """Security groups, by id, name or tags."""
    ami_selector_terms: list[SelectorTerm] = Field(min_length=1, max_length=30)
    """AMIs, by id, name, tags or alias (`al2023@latest`); the newest matching the instance's arch wins."""
    ami_family: Literal["AL2", "AL2023", "Bottlerocket", "Ubuntu", "Windows2022", "Custom"] | None = None
    """Bootstrap format of the user data. Default: taken from the alias, else `Custom`."""
    role: str | None = None
    """IAM role name; an instance profile is made for it. Exactly one of role or instanceProfile."""
    instance_profile: str | None = None
    """Existing IAM instance profile name. Exactly one of role or instanceProfile."""
    block_device_mappings: list[BlockDeviceMapping] = Field(default_factory=list)
    """Volumes. Default: the AMI's."""
    user_data: str | None = None
    """User data merged with the bootstrap the AMI family needs."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Tags on instances, volumes and launch templates (ours are added: cluster, nodepool, nodeclaim)."""
    metadata_options: MetadataOptions = Field(default_factory=MetadataOptions)
    """Instance metadata service settings."""
    associate_public_ip_address: bool | None = Field(default=None, alias="associatePublicIPAddress")
    """Give instances a public IP. Default: the subnet's setting."""
    detailed_monitoring: bool = False
    """CloudWatch detailed monitoring. Default false."""
    capacity_reservation_selector_terms: list[CapacityReservationSelectorTerm] = Field(
        default_factory=list, max_length=30
    )
    """Capacity reservations and Capacity Blocks to launch into, by id, tags or owner. Their free
    instances become `reserved` offerings, used before any spot or on-demand. Default: none."""
    placement: AWSPlacement | None = None
    """Keep each gang in one network island: a cluster placement group, EFA interfaces. Default: none
    (a gang still lands in one zone)."""

    @model_validator(mode="after")
    def _one_identity(self) -> AWSNodeClassSpec:
        errors = [
            FieldError(f"tag {k} is set by the provisioner and may not be set here", path=("tags", k))
            for k in self.tags
            if k.startswith(f"{labels.GROUP}/") or k.startswith("kubernetes.io/cluster")
        ]
        if bool(self.role) == bool(self.instance_profile):
            errors.insert(
                0,
                FieldError(
                    "give exactly one of role or instanceProfile",
                    path=("instanceProfile",) if self.instance_profile else ("role",),
                ),
            )
        raise_all(errors)
        return self


class ResolvedSubnet(Model):
    """A subnet the selectors found."""

    id: str
    """Subnet id (`subnet-0abc...`)."""
    zone: str
    """Its availability zone (`us-east-1a`)."""
    zone_id: str | None = Field(default=None, alias="zoneID")
    """Its zone id (`use1-az1`), when known."""


class ResolvedID(Model):
    """A security group or AMI the selectors found."""

    id: str
    """The object's id (`sg-0abc...`, `ami-0abc...`)."""
    name: str | None = None
    """Its name, when it has one."""


class AWSNodeClassStatus(Model):
    """What the AWS selectors resolved to."""

    subnets: list[ResolvedSubnet] = Field(default_factory=list)
    """Subnets found, with their zones."""
    security_groups: list[ResolvedID] = Field(default_factory=list)
    """Security groups found."""
    amis: list[ResolvedID] = Field(default_factory=list)
    """AMIs found."""
    instance_profile: str | None = None
    """The instance profile used."""
    conditions: list[Condition] = Field(default_factory=list)
    """Ready (all selectors resolved)."""


class AWSNodeClass(NodeClass):
    """An AWSNodeClass (`provisioner.sh/v1`): how to launch EC2 instances (subnets, security groups, AMI, IAM
    role, volumes, user data, tags). The shape of Karpenter's `karpenter.k8s.aws/v1` EC2NodeClass."""

    api_version: Literal["provisioner.sh/v1"] = Field("provisioner.sh/v1", alias="apiVersion")
    kind: Literal["AWSNodeClass"] = "AWSNodeClass"
    metadata: ObjectMeta
    spec: AWSNodeClassSpec
    status: AWSNodeClassStatus | None = None

    def launch_zones(self, zones: Sequence[str]) -> list[str]:
        """The zones of its resolved subnets (all of `zones` before they are resolved)."""
        if self.status is not None and self.status.subnets:
            chosen = {s.zone for s in self.status.subnets}
            return [z for z in zones if z in chosen]
        return list(zones)

    @classmethod
    def simulated(cls, name: str, zones: Sequence[str]) -> AWSNodeClass:
        """Selectors the simulator never resolves, and one resolved subnet per zone."""
        return cls.model_validate(
            {
                "metadata": {"name": name},
                "spec": {
                    "subnetSelectorTerms": [{"tags": {"simulated": "*"}}],
                    "securityGroupSelectorTerms": [{"tags": {"simulated": "*"}}],
                    "amiSelectorTerms": [{"alias": "al2023@latest"}],
                    "role": "simulated",
                },
                "status": {"subnets": [{"id": f"subnet-{z}", "zone": z} for z in zones]},
            }
        )
