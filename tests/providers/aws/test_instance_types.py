"""Instance types from EC2 over real HTTP: shapes and GPUs from DescribeInstanceTypes, offerings per zone
limited to the NodeClass's subnets, spot prices from DescribeSpotPriceHistory, on-demand prices from the
Pricing API or the built-in catalog, and the cache in front of it all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from providers.aws import AWSProvider
from provisioner.api import labels as wk
from provisioner.cloudprovider import InstanceType, NodeClassNotReady, catalog
from testkit.providers.aws import prices, world
from testkit.providers.aws.faults import FaultProxy

SPOT = wk.CAPACITY_TYPE_SPOT
ON_DEMAND = wk.CAPACITY_TYPE_ON_DEMAND
MIB = 2**20


def by_name(types: list[InstanceType]) -> dict[str, InstanceType]:
    return {t.name: t for t in types}


def test_p5_48xlarge_has_8_h100_gpus_of_80_gib(provider: AWSProvider, account: world.World) -> None:
    p5 = by_name(provider.instance_types(account.node_class))["p5.48xlarge"]

    assert p5.gpu is not None
    assert (p5.gpu.name, p5.gpu.count, p5.gpu.memory_mib, p5.gpu.manufacturer) == ("h100", 8, 81920, "nvidia")
    assert p5.capacity[wk.GPU_RESOURCE] == 8
    assert p5.capacity["cpu"] == 192_000
    assert p5.capacity["memory"] == 2_097_152 * MIB
    assert p5.labels[wk.GPU_NAME] == "h100"
    assert p5.labels[wk.GPU_COUNT] == "8"
    assert p5.labels[wk.GPU_MEMORY] == "81920"
    assert p5.labels[wk.INSTANCE_FAMILY] == "p5"
    assert p5.labels[wk.REGION] == "us-east-1"
    assert p5.overhead["cpu"] > 0 and p5.allocatable["memory"] < p5.capacity["memory"]


@pytest.mark.parametrize(
    ("instance_type", "gpu_name", "count", "memory_mib"),
    [
        ("p4d.24xlarge", "a100", 8, 40960),
        ("g5.xlarge", "a10g", 1, 22888),
        ("g6.xlarge", "l4", 1, 22888),
        ("g4dn.xlarge", "t4", 1, 16384),
    ],
    ids=["p4d-a100", "g5-a10g", "g6-l4", "g4dn-t4"],
)
def test_gpu_names_are_the_shared_lowercase_labels(
    provider: AWSProvider,
    account: world.World,
    instance_type: str,
    gpu_name: str,
    count: int,
    memory_mib: int,
) -> None:
    it = by_name(provider.instance_types(account.node_class))[instance_type]

    assert it.gpu is not None
    assert (it.gpu.name, it.gpu.count, it.gpu.memory_mib) == (gpu_name, count, memory_mib)


def test_cpu_types_carry_no_gpu_and_an_eni_based_pod_limit(
    provider: AWSProvider, account: world.World
) -> None:
    types = by_name(provider.instance_types(account.node_class))

    # m5.large: 3 ENIs x (10 addresses - 1) + 2 = 29 pods; m5.2xlarge: 4 x (15 - 1) + 2 = 58.
    assert types["m5.large"].gpu is None
    assert wk.GPU_RESOURCE not in types["m5.large"].capacity
    assert types["m5.large"].max_pods == 29
    assert types["m5.2xlarge"].max_pods == 58
    # Big machines are capped at 250, as EKS recommends.
    assert types["p5.48xlarge"].max_pods == 250


def test_offerings_are_limited_to_the_zones_of_the_node_class_subnets(
    provider: AWSProvider, account: world.World
) -> None:
    types = provider.instance_types(account.node_class)

    zones = {o.zone for t in types for o in t.offerings}
    assert zones == set(account.zones)
    m5 = by_name(types)["m5.large"]
    assert {(o.zone, o.capacity_type) for o in m5.offerings} == {
        (z, ct) for z in account.zones for ct in (SPOT, ON_DEMAND)
    }


def test_a_node_class_selecting_one_subnet_by_id_offers_only_its_zone(
    provider: AWSProvider, account: world.World
) -> None:
    nc = world.node_class(subnetSelectorTerms=[{"id": account.subnets["us-east-1b"]}])

    zones = {o.zone for t in provider.instance_types(nc) for o in t.offerings}

    assert zones == {"us-east-1b"}


def test_spot_prices_are_the_latest_spot_price_history_per_zone(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    proxy.set_spot_price(instance_type="m5.large", zone="us-east-1b", price=0.0123)

    m5 = by_name(provider.instance_types(account.node_class))["m5.large"]

    spot = {o.zone: o.price for o in m5.offerings if o.capacity_type == SPOT}
    assert spot == {
        "us-east-1a": prices.spot("m5.large", "us-east-1a"),
        "us-east-1b": 0.0123,
        "us-east-1c": prices.spot("m5.large", "us-east-1c"),
    }


def test_on_demand_prices_fall_back_to_the_catalog_when_the_pricing_api_fails(
    provider: AWSProvider, account: world.World, proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="providers.aws")

    p5 = by_name(provider.instance_types(account.node_class))["p5.48xlarge"]

    on_demand = {o.price for o in p5.offerings if o.capacity_type == ON_DEMAND}
    assert on_demand == {catalog.on_demand_price("aws", "p5.48xlarge", "us-east-1")}
    assert "AWSPriceListService.GetProducts" in proxy.actions
    assert any("Pricing API unavailable" in r.getMessage() for r in caplog.records)


def test_on_demand_prices_come_from_the_pricing_api_when_it_answers(
    new_provider: Callable[..., AWSProvider], account: world.World, proxy: FaultProxy
) -> None:
    proxy.pricing_api = True
    proxy.list_prices["m5.large"] = 0.0999

    m5 = by_name(new_provider().instance_types(account.node_class))["m5.large"]

    assert {o.price for o in m5.offerings if o.capacity_type == ON_DEMAND} == {0.0999}


def test_instance_types_are_cached_until_the_ttl_passes(
    new_provider: Callable[..., AWSProvider], account: world.World, proxy: FaultProxy
) -> None:
    now = [0.0]
    provider = new_provider(clock=lambda: now[0], cache_ttl=300.0)
    provider.instance_types(account.node_class)
    calls = proxy.actions.count("DescribeInstanceTypes")

    provider.instance_types(account.node_class)
    assert proxy.actions.count("DescribeInstanceTypes") == calls

    now[0] = 301.0
    provider.instance_types(account.node_class)
    assert proxy.actions.count("DescribeInstanceTypes") == calls + 1


def test_types_without_an_ami_for_their_architecture_are_not_offered(
    provider: AWSProvider, account: world.World
) -> None:
    # The account's only AMI is x86_64 (moto cannot make an arm64 one), so Graviton types are left out.
    types = by_name(provider.instance_types(account.node_class))

    assert "m5.large" in types
    assert not [t for t in types.values() if t.labels[wk.ARCH] != "amd64"]
    assert "m7g.large" in by_name(provider.region_instance_types())


def test_region_instance_types_span_every_zone_of_the_region(provider: AWSProvider) -> None:
    types = by_name(provider.region_instance_types())

    p5 = types["p5.48xlarge"]
    assert p5.gpu is not None and (p5.gpu.name, p5.gpu.count) == ("h100", 8)
    assert {o.zone for o in types["m5.large"].offerings} >= {"us-east-1a", "us-east-1b", "us-east-1d"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"subnetSelectorTerms": [{"tags": {"nothing": "here"}}]}, "subnetSelectorTerms matched no subnet"),
        (
            {"securityGroupSelectorTerms": [{"tags": {"nothing": "here"}}]},
            "securityGroupSelectorTerms matched no security group",
        ),
        ({"amiSelectorTerms": [{"id": "ami-0123456789abcdef0"}]}, "amiSelectorTerms matched no"),
        ({"amiSelectorTerms": [{"alias": "al2023@latest"}]}, "matched no available"),
    ],
    ids=["no-subnet", "no-security-group", "unknown-ami", "alias-not-published"],
)
def test_a_node_class_whose_selectors_find_nothing_is_not_ready(
    provider: AWSProvider, account: world.World, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(NodeClassNotReady, match=message):
        provider.instance_types(world.node_class(**spec))


def test_a_gcp_node_class_is_not_ready_for_aws(provider: AWSProvider) -> None:
    from providers.gcp.model import GCPNodeClass

    gcp = GCPNodeClass.model_validate(
        {"metadata": {"name": "gcp"}, "spec": {"project": "p", "image": "projects/p/global/images/i"}}
    )

    with pytest.raises(NodeClassNotReady, match="only AWSNodeClass"):
        provider.instance_types(gcp)


def test_an_alias_without_a_known_kubernetes_version_is_not_ready(
    new_provider: Callable[..., AWSProvider], account: world.World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROVISIONER_KUBERNETES_VERSION", raising=False)
    provider = new_provider(cluster_name="not-in-eks")

    with pytest.raises(NodeClassNotReady, match="needs the cluster's Kubernetes version"):
        provider.instance_types(world.node_class(amiSelectorTerms=[{"alias": "al2023@latest"}]))


@pytest.mark.parametrize(
    ("instance_type", "resources"),
    [
        ("p5en.48xlarge", {wk.GPU_RESOURCE: 8}),
        ("p6-b200.48xlarge", {wk.GPU_RESOURCE: 8}),
        ("p5.4xlarge", {wk.GPU_RESOURCE: 1}),
        ("gr6.4xlarge", {wk.GPU_RESOURCE: 1}),
        ("trn1.32xlarge", {"aws.amazon.com/neuron": 16, "aws.amazon.com/neuroncore": 32}),
        ("inf2.xlarge", {"aws.amazon.com/neuron": 1, "aws.amazon.com/neuroncore": 2}),
    ],
    ids=["p5en-h200", "p6-b200", "p5-4xlarge-one-h100", "gr6-l4", "trn1", "inf2"],
)
def test_the_2026_types_come_from_describe_instance_types_as_the_catalog_has_them(
    provider: AWSProvider, account: world.World, instance_type: str, resources: dict[str, int]
) -> None:
    """GpuInfo and NeuronInfo read over HTTP give the same accelerators, vCPUs and pod limit as the
    built-in catalog row (whose prices the provider falls back to)."""
    it = by_name(provider.instance_types(account.node_class))[instance_type]
    row = catalog.shape("aws", instance_type)

    assert row is not None and it.gpu is not None and row.gpu is not None
    assert {k: v for k, v in it.capacity.items() if "/" in k} == resources
    assert (it.gpu.name, it.gpu.count, it.gpu.manufacturer, it.gpu.cores) == (
        row.gpu.name,
        row.gpu.count,
        row.gpu.manufacturer,
        row.gpu.cores,
    )
    assert (it.vcpu, it.memory_mib, it.max_pods) == (row.vcpu, row.memory_mib, row.max_pods)
    assert it.labels[wk.GPU_NAME] == row.gpu.name


def test_types_ec2_does_not_offer_in_the_region_are_not_listed(
    provider: AWSProvider, account: world.World
) -> None:
    """EC2 offers p5e.48xlarge and trn2.48xlarge in us-east-2, not us-east-1 (DescribeInstanceTypeOfferings):
    the provider lists what the region offers, whatever the built-in catalog holds."""
    types = by_name(provider.instance_types(account.node_class))

    assert "p5e.48xlarge" not in types and "trn2.48xlarge" not in types
    assert catalog.shape("aws", "p5e.48xlarge") is not None
