"""What a provider plug-in declares: the one object a cloud hands the core.

A cloud is a package (e.g. `providers/aws/`) with a module holding a `ProviderPlugin`, registered by one
line of its `pyproject.toml`:

    [project.entry-points."provisioner.providers"]
    aws = "providers.aws.plugin:PLUGIN"

The plug-in says its name (`--cloud NAME`), the NodeClass kinds it brings (model and CRD names, see
provisioner.api.plugins.Kind), the catalogs it ships as package data, its `provisioner run` options (flag,
environment variable, help), how to build its CloudProvider from those options and the operator's
`Wiring`, what the chart grants it (`ChartPieces`) and how Karpenter's objects for its cloud are imported
(`KarpenterProvider`). A cloud without kubelets (the fake one) also
gives the Nodes it stands in for (`NodeMaker`) and the simulator's cloud (`simulated`).
provisioner.cloudprovider.registry reads the installed plug-ins; nothing in the core names one.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from provisioner.api.karpenter_providers import KarpenterProvider
from provisioner.api.plugins import CatalogFile, Kind
from provisioner.cloudprovider.protocol import CloudProvider, Instance
from provisioner.cloudprovider.types import InstanceType


class OptionError(ValueError):
    """A plug-in's options do not let it build its provider: the message, and the flag when it is not
    already at the start of the message."""

    def __init__(self, message: str, *, flag: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.flag = flag


@dataclass(frozen=True)
class CatalogQuery:
    """What `provisioner catalog --cloud NAME` asks a plug-in: the types its cloud offers in `region`."""

    region: str
    project: str | None = None
    """`--project` (GCP's)."""
    endpoint: str | None = None
    """`--endpoint`: an API endpoint override."""


@dataclass(frozen=True)
class Option:
    """One `provisioner run` option of a plug-in, read from the environment when the flag is not given."""

    flag: str
    """The flag, `--aws-region`; the plug-in reads its value under `key`."""
    help: str = ""
    env: str | None = None
    """Environment variable read when the flag is not given."""
    default: str | int | float | None = None
    type: type[str] | type[int] | type[float] = str
    """What the value is parsed as (`run` refuses another, naming the flag); None when not given."""
    shared_needs: str | None = None
    """Why it is required when several replicas share the cloud (`run --shards`), when it is."""

    @property
    def key(self) -> str:
        """`aws_region` for `--aws-region`: the name the value is passed under."""
        return self.flag.lstrip("-").replace("-", "_")


OptionValues = Mapping[str, Any]
"""A plug-in's option values by `Option.key`, each of its `Option.type` or None."""


@dataclass(frozen=True)
class Wiring:
    """What the operator gives every provider it builds."""

    cluster_name: str
    clock: Callable[[], datetime]
    on_launch: Callable[[Instance, InstanceType], None] | None = None
    """Called after a launch by a cloud without kubelets, to register the Node it stands in for."""
    on_delete: Callable[[Instance], None] | None = None
    """Called after a delete by such a cloud, to remove that Node."""
    shared: bool = False
    """Several replicas (shards) share the cloud: a cloud kept in a local file must share that file."""


class NodeMaker(Protocol):
    """The Nodes a cloud without kubelets stands in for (as Karpenter's kwok provider does)."""

    def node_for_instance(
        self,
        instance: Instance,
        instance_type: InstanceType | None,
        *,
        ready: bool = True,
        devices: bool = True,
        now: datetime | None = None,
    ) -> dict[str, Any]: ...

    def node_name_for(self, instance: Instance) -> str: ...


class SimulatedCloud(CloudProvider, Protocol):
    """The cloud `provisioner simulate` runs on: a CloudProvider the simulator can also steer (capacity,
    stockouts, reservations, interruptions) and read (its catalog and zones)."""

    on_launch: Callable[[Instance, InstanceType], None] | None
    on_delete: Callable[[Instance], None] | None

    @property
    def catalog(self) -> builtins.list[InstanceType]: ...

    @property
    def zones(self) -> builtins.list[str]: ...

    def remaining(self, *, instance_type: str, zone: str, capacity_type: str) -> int | None: ...

    def set_capacity(
        self,
        *,
        instance_type: str | None = None,
        zone: str | None = None,
        capacity_type: str | None = None,
        count: int | None,
    ) -> None: ...

    def mark_unavailable(
        self, *, instance_type: str | None = None, zone: str | None = None, capacity_type: str | None = None
    ) -> None: ...

    def mark_available(
        self, *, instance_type: str | None = None, zone: str | None = None, capacity_type: str | None = None
    ) -> None: ...

    def add_reservation(
        self,
        reservation_id: str,
        *,
        instance_type: str,
        zone: str,
        count: int,
        kind: str = ...,
        ends_at: datetime | None = None,
    ) -> None: ...

    def end_reservation(self, reservation_id: str) -> None: ...

    def interrupt(
        self, provider_id: str, kind: str = "spot-interruption", *, detail: str = "", reclaim: bool = False
    ) -> None: ...


@dataclass(frozen=True)
class ChartPieces:
    """What the Helm chart (charts/provisioner) holds for a plug-in: the values under the plug-in's name,
    the `run` flag each sets, the ones the chart requires when `cloud` includes the plug-in, the
    ServiceAccount annotation each sets (the cloud identity), the verbs on Nodes the controller needs
    beyond the core's, and whether replicas may shard over it. `provisioner chart --write` turns it into
    the chart's `providers/NAME.yaml` (which the templates read) and the plug-in's part of
    `values.schema.json` (provisioner.cloudprovider.chart_files)."""

    values: Mapping[str, str] = field(default_factory=dict)
    """values.yaml key under `NAME:` -> its default."""
    examples: Mapping[str, str] = field(default_factory=dict)
    """values key -> a value of the form the chart's schema accepts (what the tests render with)."""
    flags: Mapping[str, str] = field(default_factory=dict)
    """`run` flag -> the values key the Deployment passes it from, in the order the Deployment passes
    them (a flag whose value is empty is left out)."""
    required: Mapping[str, str] = field(default_factory=dict)
    """Values keys the chart refuses to render without when `cloud` includes the plug-in -> what the value
    is, for the message ("" for none); their flags are passed only when `cloud` includes the plug-in."""
    patterns: Mapping[str, str] = field(default_factory=dict)
    """values key -> the `pattern` the chart's schema holds its value to (JSON schema)."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    """ServiceAccount annotation -> the values key it comes from."""
    node_verbs: tuple[str, ...] = ()
    """Verbs on Nodes beyond the core's (a cloud without kubelets creates them)."""
    no_shards: str = ""
    """Why the chart refuses `shards` with this cloud, when it does."""


@dataclass(frozen=True)
class ProviderPlugin:
    """A cloud, as it registers itself (see the module docstring)."""

    name: str
    """`--cloud NAME`; the entry point's name."""
    build: Callable[[OptionValues, Wiring], CloudProvider]
    """Builds the provider from its options (by `Option.key`) and the wiring; raises OptionError."""
    nodeclasses: Sequence[Kind] = ()
    """The NodeClass kinds it launches (model, CRD names and columns)."""
    catalogs: Mapping[str, CatalogFile] = field(default_factory=dict)
    """Built-in catalogs it ships, by name."""
    options: Sequence[Option] = ()
    """Its `provisioner run` options."""
    billing_names: Mapping[str, str] = field(default_factory=dict)
    """providerID scheme of its instances (`aws` in `aws:///...`) -> the FOCUS ProviderName its costs
    are exported under."""
    serves_every_kind: bool = False
    """True for a cloud that launches pools of any installed kind (the fake one)."""
    nodes: NodeMaker | None = None
    """The Nodes it stands in for, when its instances have no kubelet."""
    simulated: Callable[[list[InstanceType], Callable[[], datetime]], SimulatedCloud] | None = None
    """The simulator's cloud over these types and clock, when this plug-in provides it."""
    read_types: Callable[[CatalogQuery], list[InstanceType]] | None = None
    """The types its cloud offers in a region, read live (`provisioner catalog`); raises OptionError or
    CloudProviderError."""
    default_region: Callable[[], str] | None = None
    """The region `provisioner catalog` reads when none is given."""
    catalog_defaults: Mapping[str, str] = field(default_factory=dict)
    """`provisioner catalog` flag (`--region`, `--project`, `--endpoint`) -> where its `read_types` takes
    the value from when the flag is not given (`AWS_REGION, us-east-1`), as the flag's help says."""
    chart: ChartPieces = ChartPieces()
    """Its chart values and RBAC rules."""
    dev_only: str | None = None
    """Why it is for a development cluster only, when it is (`--cloud` says so)."""
    karpenter: KarpenterProvider | None = None
    """Karpenter's provider for the same cloud, as `templates import-karpenter` converts its NodeClass
    into this plug-in's and reads its labels."""
