"""The GCPNodeClass model (`provisioner.sh/v1`): how to launch Compute Engine instances (project, network,
image, service account, boot disk, labels, metadata, placement, reservations). The GCP plug-in
(providers.gcp.plugin) declares it; the core reaches it only through the registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field, model_validator

from provisioner.api.common import Condition, FieldError, Model, ObjectMeta, raise_all
from provisioner.api.nodeclass import NodeClass


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


class GCPNodeClass(NodeClass):
    """A GCPNodeClass (`provisioner.sh/v1`): how to launch Compute Engine instances (project, network,
    image, service account, boot disk, labels, metadata)."""

    api_version: Literal["provisioner.sh/v1"] = Field("provisioner.sh/v1", alias="apiVersion")
    kind: Literal["GCPNodeClass"] = "GCPNodeClass"
    metadata: ObjectMeta
    spec: GCPNodeClassSpec
    status: GCPNodeClassStatus | None = None

    def launch_zones(self, zones: Sequence[str]) -> list[str]:
        """The zones of `spec.zones` (all of `zones` when it lists none)."""
        if self.spec.zones:
            return [z for z in zones if z in self.spec.zones]
        return list(zones)

    def named_region(self) -> str | None:
        return self.spec.region or None

    @classmethod
    def simulated(cls, name: str, zones: Sequence[str]) -> GCPNodeClass:
        """A simulated project and image, launching in every zone of `zones`."""
        return cls.model_validate(
            {
                "metadata": {"name": name},
                "spec": {
                    "project": "simulated",
                    "image": "projects/simulated/global/images/default",
                    "zones": list(zones),
                },
            }
        )
