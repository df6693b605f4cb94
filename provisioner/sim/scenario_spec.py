"""What a `Scenario` document (`provisioner.sh/v1alpha1`) may say: catalogs and regions, stockouts,
reservations, the cluster's default pools, files to include, and a timeline of steps over virtual time.
Models only; loading and checking a scenario is `provisioner.sim.scenario`'s, running it the runner's."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field

from provisioner.api.common import Model, ObjectMeta
from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.types import Offering

SCENARIO_API_VERSION: Final = "provisioner.sh/v1alpha1"


class Unavailable(Model):
    """A stockout: the offerings it selects have no capacity. Omitted fields match everything."""

    instance_type: str | None = None
    """Instance type name (`p5.48xlarge`); default every type."""
    zone: str | None = None
    """Zone (`us-east-1a`); default every zone."""
    capacity_type: Literal["spot", "on-demand", "reserved"] | None = None
    """`spot`, `on-demand` or `reserved`; default every capacity type."""

    def matches(self, instance_type: str, offering: Offering) -> bool:
        return (
            (self.instance_type is None or self.instance_type == instance_type)
            and (self.zone is None or self.zone == offering.zone)
            and (self.capacity_type is None or self.capacity_type == offering.capacity_type)
        )


class CapacitySpec(Unavailable):
    """How many more instances the offerings it selects can launch (a shortage short of a stockout): a
    gang needing more nodes than that launches none. Omitted selector fields match everything."""

    count: int = Field(ge=0)
    """Instances each selected offering has left (`0` is a stockout); a terminated instance gives its
    slot back."""


class ReservationSpec(Model):
    """Capacity already paid for (an AWS capacity reservation or Capacity Block, a GCP reservation):
    `count` instances of one type in one zone, used before any spot or on-demand."""

    id: str = Field(min_length=1)
    """The reservation's id (`cr-h100-prod`); the label `provisioner.sh/capacity-reservation-id` of its nodes."""
    instance_type: str
    """Instance type it holds (`p5.48xlarge`)."""
    zone: str
    """Zone it is in (`us-east-1a`)."""
    count: int = Field(ge=0)
    """Instances it holds."""
    ends_at: str | None = None
    """When it ends, after the start of the run (`20h`): a Capacity Block. Its nodes are drained before
    that time. Default: open-ended."""


TIMELINE_WORKLOAD_KINDS = ("Pod", "Deployment", "ReplicaSet", "StatefulSet", "Job")
TIMELINE_QUOTA_KINDS = ("Team", "Department")
"""Cluster-scoped kinds a timeline step may apply (create or replace) and delete."""


class DeleteRef(Model):
    """What to delete at a step: a Pod, a Deployment/ReplicaSet/StatefulSet/Job and its pods, or a Team
    or Department."""

    kind: Literal["Pod", "Deployment", "ReplicaSet", "StatefulSet", "Job", "Team", "Department"]
    """`Pod`, `Deployment`, `ReplicaSet`, `StatefulSet`, `Job`, `Team` or `Department`."""
    namespace: str = "default"
    """Namespace; default `default` (ignored for a Team or Department)."""
    name: str
    """`metadata.name` of the object."""


class InterruptSelector(Model):
    """Which nodes the cloud takes back at a step (a spot interruption). Omitted fields match every node."""

    node_pool: str | None = None
    """NodePool name; default every pool."""
    capacity_type: Literal["spot", "on-demand", "reserved"] | None = None
    """`spot`, `on-demand` or `reserved`; default every capacity type."""


class TimelineStep(Model):
    """What happens at one virtual time of a timeline (`provisioner simulate` with time)."""

    at: str
    """When, after the start: a duration such as `90m`, `2h30m` or `0s`."""
    apply: list[dict[str, Any]] = Field(default_factory=list)
    """Manifests to create: Pods, Deployments, ReplicaSets, StatefulSets, Jobs (expanded to pods); Teams
    and Departments (created, or replacing the one of that name)."""
    delete: list[DeleteRef] = Field(default_factory=list)
    """Workloads to delete (`{kind, namespace, name}`); a controller's pods go with it."""
    unavailable: list[Unavailable] = Field(default_factory=list)
    """Offerings that run out of capacity from now on (`{instanceType, zone, capacityType}`)."""
    available: list[Unavailable] = Field(default_factory=list)
    """Offerings whose capacity comes back (same selectors)."""
    capacity: list[CapacitySpec] = Field(default_factory=list)
    """Instances offerings have left from now on (`{instanceType, zone, capacityType, count}`)."""
    interrupt: list[InterruptSelector] = Field(default_factory=list)
    """Nodes the cloud interrupts (`{nodePool, capacityType}`, each optional)."""
    reservations: list[ReservationSpec] = Field(default_factory=list)
    """Reservations that start now (or change: same id) (`{id, instanceType, zone, count, endsAt}`)."""
    end_reservations: list[str] = Field(default_factory=list)
    """Ids of reservations that end now: they take no new instance."""


def _known_catalog(name: str) -> str:
    allowed = catalog.names()
    if name not in allowed:
        raise ValueError(f"catalog {name!r} is not known; allowed: {', '.join(allowed)}")
    return name


CatalogName = Annotated[str, AfterValidator(_known_catalog)]
"""A built-in catalog's name: one an installed plug-in ships, or `karpenter-benchmark`."""


class CatalogRef(Model):
    """One built-in catalog and the region it is read in."""

    name: CatalogName
    """A catalog an installed plug-in ships (`aws` serves AWSNodeClass pools, `gcp` GCPNodeClass pools), or
    `karpenter-benchmark` (pools of any kind)."""
    region: str | None = None
    """Region; default the region the scenario's NodeClasses of the kinds it serves name (GCPNodeClass
    `spec.region`, when they agree), else the catalog's default region (`us-east-1`, `us-central1`,
    `region-1`)."""


class DefaultNodePools(Model):
    """The cluster's default pool lists (what `provisioner run --default-cpu-pools/--default-gpu-pools`
    and the chart's `defaultNodePools` set), for pods that name no `provisioner.sh/nodepools` list."""

    cpu: list[str] = Field(default_factory=list)
    """NodePools, in order, for pods asking for no GPU. Empty: the pool named `default`, else every pool
    by weight."""
    gpu: list[str] = Field(default_factory=list)
    """NodePools, in order, for pods asking for GPUs. Empty: as for `cpu`."""


class ScenarioSpec(Model):
    """What the scenario runs against."""

    catalog: CatalogName | None = None
    """One built-in catalog for every pool: `aws`, `gcp` or `karpenter-benchmark`. Default: one catalog per
    NodeClass kind the pools use (`aws` for AWSNodeClass, `gcp` for GCPNodeClass), or see `catalogs`."""
    region: str | None = None
    """Region of `catalog` (or of the one catalog the pools need); default the catalog's default region."""
    catalogs: list[CatalogRef] = Field(default_factory=list)
    """Several clouds in one scenario: one catalog per NodeClass kind, each with its region
    (`[{name: aws, region: us-east-1}, {name: gcp, region: us-central1}]`). Not with `catalog`."""
    unavailable: list[Unavailable] = Field(default_factory=list)
    """Stockouts: offerings with no capacity (`{instanceType, zone, capacityType}`, each optional)."""
    capacity: list[CapacitySpec] = Field(default_factory=list)
    """Instances offerings have left (`{instanceType, zone, capacityType, count}`, selectors optional):
    a shortage. Default: no limit. A gang (a Kueue pod group, a ProvisioningRequest) needing more new
    nodes than one offering has left launches none."""
    include: list[str] = Field(default_factory=list)
    """Files and folders read with this scenario, relative to its file (`[../nodepool_templates]`): the
    pools a scenario runs against, kept in one place. Default none."""
    default_node_pools: DefaultNodePools = Field(default_factory=DefaultNodePools)
    """The cluster's default CPU and GPU pool lists (`{cpu: [...], gpu: [...]}`); default none."""
    reservations: list[ReservationSpec] = Field(default_factory=list)
    """Reservations held from the start (`{id, instanceType, zone, count, endsAt}`); their nodes are
    `capacityType: reserved`. Default: none."""
    duration: str | None = None
    """How long a timeline runs (`24h`); default one hour after its last step. Only with `timeline`."""
    timeline: list[TimelineStep] = Field(default_factory=list)
    """Steps at virtual times; with one, `provisioner simulate` runs the controllers over time."""
    allow_oversubscription: bool = False
    """Team and Department quotas promising more than a department or pool holds are warnings, not
    errors (as `templates validate --allow-oversubscription`). Default `false`."""


class Scenario(Model):
    """The `Scenario` document (`provisioner.sh/v1alpha1`)."""

    api_version: Literal["provisioner.sh/v1alpha1"] = Field(SCENARIO_API_VERSION, alias="apiVersion")
    kind: Literal["Scenario"] = "Scenario"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ScenarioSpec = Field(default_factory=ScenarioSpec)
