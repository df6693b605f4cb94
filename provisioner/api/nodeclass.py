"""NodeClasses: how to launch on one cloud. `AWSNodeClass` (Karpenter's EC2NodeClass shape) and
`GCPNodeClass`. A NodePool names one through `nodeClassRef`, so one controller serves pools on both clouds.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from provisioner.api import labels, quantities
from provisioner.api.common import Condition, FieldError, Model, ObjectMeta, raise_all


class SelectorTerm(Model):
    """Select a cloud object by `id`, by `name` or by `tags` (all tags must match; `*` matches any value)."""

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

    subnet_selector_terms: list[SelectorTerm] = Field(min_length=1)
    """Subnets to launch into, by id or tags; their zones are the zones the pool can use."""
    security_group_selector_terms: list[SelectorTerm] = Field(min_length=1)
    """Security groups, by id, name or tags."""
    ami_selector_terms: list[SelectorTerm] = Field(min_length=1)
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
    capacity_reservation_selector_terms: list[CapacityReservationSelectorTerm] = Field(default_factory=list)
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


class AWSNodeClass(Model):
    """An AWSNodeClass (`provisioner.sh/v1`): how to launch EC2 instances (subnets, security groups, AMI, IAM
    role, volumes, user data, tags). The shape of Karpenter's `karpenter.k8s.aws/v1` EC2NodeClass."""

    api_version: Literal["provisioner.sh/v1"] = Field("provisioner.sh/v1", alias="apiVersion")
    kind: Literal["AWSNodeClass"] = "AWSNodeClass"
    metadata: ObjectMeta
    spec: AWSNodeClassSpec
    status: AWSNodeClassStatus | None = None

    @property
    def name(self) -> str:
        return self.metadata.name or ""


class BootDisk(Model):
    """The boot disk of a GCE instance."""

    size_gb: int = Field(100, ge=10, le=65536, alias="sizeGb")
    """Size in GB. Default 100."""
    type: Literal["pd-standard", "pd-balanced", "pd-ssd", "pd-extreme", "hyperdisk-balanced"] = "pd-balanced"
    """Disk type. Default `pd-balanced`."""
    kms_key: str | None = None
    """Customer-managed key, `projects/.../cryptoKeys/...`. Default Google-managed."""


class ServiceAccount(Model):
    """The service account the instance runs as."""

    email: str
    """Service account email."""
    scopes: list[str] = Field(default_factory=lambda: ["https://www.googleapis.com/auth/cloud-platform"])
    """OAuth scopes. Default `cloud-platform`."""


class GCPReservations(Model):
    """Compute Engine reservations to launch into (reservation affinity)."""

    names: list[str] = Field(default_factory=list)
    """Specific reservations by name (`SPECIFIC_RESERVATION`); empty: any reservation of the project
    whose machine type and zone match (`ANY_RESERVATION`)."""


class GCPPlacement(Model):
    """How the nodes of one gang are kept close on Compute Engine: a compact placement policy (a
    resource policy with `groupPlacementPolicy.collocation: COLLOCATED`), an existing one by name or one
    the provisioner creates per gang and deletes when the gang's nodes are gone."""

    policy: str | None = Field(default=None, min_length=1, max_length=63)
    """An existing compact placement policy of the region, by name. Excludes `compactPerGang`."""
    compact_per_gang: bool = False
    """Create a compact placement policy for each gang (labelled as the provisioner's), launch its nodes
    with it, and delete it once they are gone. Excludes `policy`."""

    @model_validator(mode="after")
    def _one_policy(self) -> GCPPlacement:
        if self.policy and self.compact_per_gang:
            raise ValueError("give policy (an existing placement policy) or compactPerGang, not both")
        return self


class GCPNodeClassSpec(Model):
    """How to launch a Compute Engine instance."""

    project: str = Field(min_length=1)
    """Project id to launch in."""
    region: str | None = None
    """Region; default the controller's `--region`."""
    zones: list[str] = Field(default_factory=list)
    """Zones of the region the pool may use. Default every zone of the region."""
    network: str = "default"
    """VPC network name or URL. Default `default`."""
    subnetwork: str | None = None
    """Subnetwork name or URL. Default the network's subnet in the region."""
    image: str
    """Boot image, `projects/P/global/images/NAME` or `projects/P/global/images/family/F`."""
    service_account: ServiceAccount | None = None
    """Service account; default the project's compute default."""
    boot_disk: BootDisk = Field(default_factory=BootDisk)
    """Boot disk."""
    local_ssd_count: int = Field(0, ge=0, le=24, alias="localSSDCount")
    """Local SSDs (375 GB each) to attach. Default 0."""
    labels: dict[str, str] = Field(default_factory=dict)
    """GCE labels on instances (ours are added: cluster, nodepool, nodeclaim)."""
    metadata: dict[str, str] = Field(default_factory=dict)
    """Instance metadata (startup-script, kube-env...)."""
    network_tags: list[str] = Field(default_factory=list)
    """Network tags for firewall rules."""
    reservations: GCPReservations | None = None
    """Reservations whose free instances become `reserved` offerings, used before spot or on-demand.
    Default: none."""
    placement: GCPPlacement | None = None
    """Keep each gang close: a compact placement policy. Default: none (a gang still lands in one
    zone)."""

    @model_validator(mode="after")
    def _no_reserved_labels(self) -> GCPNodeClassSpec:
        raise_all(
            [
                FieldError(f"label {k} is set by the provisioner and may not be set here", path=("labels", k))
                for k in self.labels
                if k.startswith("provisioner")
            ]
        )
        return self


class GCPNodeClassStatus(Model):
    """What the controller last observed about the GCP settings."""

    conditions: list[Condition] = Field(default_factory=list)
    """Ready (image and network found)."""


class GCPNodeClass(Model):
    """A GCPNodeClass (`provisioner.sh/v1`): how to launch Compute Engine instances (project, network,
    image, service account, boot disk, labels, metadata)."""

    api_version: Literal["provisioner.sh/v1"] = Field("provisioner.sh/v1", alias="apiVersion")
    kind: Literal["GCPNodeClass"] = "GCPNodeClass"
    metadata: ObjectMeta
    spec: GCPNodeClassSpec
    status: GCPNodeClassStatus | None = None

    @property
    def name(self) -> str:
        return self.metadata.name or ""


NodeClass = AWSNodeClass | GCPNodeClass
