"""The fake cloud's plug-in: it launches pools of every installed NodeClass kind from a built-in catalog,
stands in for the kubelets of its instances (kwok-style Nodes) and is the cloud `provisioner simulate`
runs on. For a development cluster only: its Nodes have no machine behind them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from providers.fake import kwok
from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.plugin import (
    CatalogQuery,
    ChartPieces,
    Option,
    OptionValues,
    ProviderPlugin,
    SimulatedCloud,
    Wiring,
)
from provisioner.cloudprovider.protocol import CloudProvider
from provisioner.cloudprovider.types import InstanceType


def _build(options: OptionValues, wiring: Wiring) -> CloudProvider:
    from providers.fake.provider import FakeProvider
    from providers.fake.shared import SharedFakeProvider

    # Sharded replicas share one fake cloud (its state file), as they would share an account.
    state: str | None = options.get("fake_state")
    kind = SharedFakeProvider if wiring.shared and state else FakeProvider
    return kind(
        catalog=options.get("fake_catalog") or "aws",
        region=options.get("fake_region"),
        cluster_name=wiring.cluster_name,
        clock=wiring.clock,
        on_launch=wiring.on_launch,
        on_delete=wiring.on_delete,
        state_path=state,  # type: ignore[arg-type]  # shared only with a path
    )


def _simulated(types: list[InstanceType], clock: Callable[[], datetime]) -> SimulatedCloud:
    from providers.fake.provider import FakeProvider

    return FakeProvider(instance_types=types, cluster_name="sim", clock=clock, reveal_stockouts=False)


def _read_types(query: CatalogQuery) -> list[InstanceType]:
    from providers.fake.provider import FakeProvider

    return FakeProvider(catalog="aws", region=query.region).region_instance_types()


PLUGIN = ProviderPlugin(
    name="fake",
    build=_build,
    billing_names={"fake": "Fake cloud (provisioner)"},
    options=(
        Option("--fake-catalog", default="aws", help="Catalog the fake cloud serves: aws, gcp..."),
        Option("--fake-region"),
        Option(
            "--fake-state",
            help="File the fake cloud journals its instances in (JSON lines), so they outlive a restart.",
            shared_needs="the replicas share one fake cloud",
        ),
    ),
    serves_every_kind=True,
    chart=ChartPieces(node_verbs=("create",), no_shards="its instances live in one process"),
    nodes=kwok,
    simulated=_simulated,
    read_types=_read_types,
    default_region=lambda: catalog.default_region("aws"),
    dev_only="fake creates Nodes for instances that do not exist, for a development cluster only",
)
