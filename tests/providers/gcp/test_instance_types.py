"""GCP instance types as the scheduler sees them, read by the real client from the Compute stand-in."""

from __future__ import annotations

import pytest

from providers.gcp import GCPProvider
from provisioner.api import labels as wk
from provisioner.api.quantities import CPU, MEMORY
from provisioner.cloudprovider import InsufficientCapacity, NodeClassNotReady
from provisioner.cloudprovider.types import InstanceType
from testkit.builders import node_claim
from testkit.providers.gcp import fixtures
from testkit.providers.gcp.standin import ComputeStandIn
from testkit.providers.harness_gcp import gcp_node_class


def by_name(types: list[InstanceType]) -> dict[str, InstanceType]:
    return {t.name: t for t in types}


def test_a3_highgpu_8g_has_eight_h100_of_80_gb(provider: GCPProvider) -> None:
    a3 = by_name(provider.instance_types(gcp_node_class()))["a3-highgpu-8g"]
    assert a3.gpu is not None
    assert (a3.gpu.name, a3.gpu.count, a3.gpu.memory_mib) == ("h100", 8, 81920)
    assert a3.capacity[wk.GPU_RESOURCE] == 8
    assert a3.labels[wk.GPU_NAME] == "h100"
    assert a3.labels[wk.GPU_COUNT] == "8"
    assert a3.labels[wk.GPU_MEMORY] == "81920"
    assert a3.capacity[CPU] == 208_000


@pytest.mark.parametrize(
    ("type_name", "gpu_name", "count", "memory_mib"),
    [
        ("a2-highgpu-8g", "a100", 8, 40960),
        ("a2-ultragpu-8g", "a100", 8, 81920),
        ("g2-standard-24", "l4", 2, 24576),
        ("n1-standard-8-t4x1", "t4", 1, 16384),
        ("n1-standard-8-v100x2", "v100", 2, 16384),
        ("a3-megagpu-8g", "h100", 8, 81920),
        ("a3-ultragpu-8g", "h200", 8, 144384),
        ("a4-highgpu-8g", "b200", 8, 184320),
        ("a2-megagpu-16g", "a100", 16, 40960),
    ],
    ids=[
        "a2-a100-40gb",
        "a2-ultra-a100-80gb",
        "g2-l4",
        "n1-attached-t4",
        "n1-attached-v100",
        "a3-mega-h100",
        "a3-ultra-h200",
        "a4-b200",
        "a2-mega-16-a100",
    ],
)
def test_gpu_names_are_normalised_to_lowercase_labels(
    provider: GCPProvider, type_name: str, gpu_name: str, count: int, memory_mib: int
) -> None:
    it = by_name(provider.instance_types(gcp_node_class()))[type_name]
    assert it.gpu is not None
    assert (it.gpu.name, it.gpu.count, it.gpu.memory_mib) == (gpu_name, count, memory_mib)
    assert it.labels[wk.GPU_NAME] == gpu_name
    assert it.capacity[wk.GPU_RESOURCE] == count


def test_n1_with_t4_is_offered_only_in_zones_that_have_t4(provider: GCPProvider) -> None:
    types = by_name(provider.instance_types(gcp_node_class()))
    t4 = types["n1-standard-8-t4x1"]
    assert {o.zone for o in t4.offerings} == {"us-central1-a", "us-central1-b", "us-central1-f"}
    assert {o.zone for o in types["n1-standard-8"].offerings} == set(fixtures.ZONES)
    assert t4.labels[wk.INSTANCE_FAMILY] == "n1-standard"
    # V100 x1 is allowed up to 12 vCPU only, so a 16-vCPU n1 gets V100 in twos and fours.
    assert "n1-standard-16-v100x1" not in types
    assert "n1-standard-16-v100x2" in types


def test_every_type_has_spot_and_on_demand_offerings_per_zone_priced_from_the_catalog(
    provider: GCPProvider,
) -> None:
    e2 = by_name(provider.instance_types(gcp_node_class()))["e2-standard-2"]
    assert {(o.zone, o.capacity_type) for o in e2.offerings} == {
        (z, ct) for z in fixtures.ZONES for ct in (wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)
    }
    prices = {o.capacity_type: o.price for o in e2.offerings}
    assert 0 < prices[wk.CAPACITY_TYPE_SPOT] < prices[wk.CAPACITY_TYPE_ON_DEMAND]


def test_zones_of_other_regions_shared_core_and_unpriced_types_are_left_out(provider: GCPProvider) -> None:
    types = by_name(provider.instance_types(gcp_node_class()))
    assert all(o.zone != fixtures.OTHER_REGION_ZONE for t in types.values() for o in t.offerings)
    assert "e2-medium" not in types  # shared core
    assert "t2a-standard-4" not in types  # not in the built-in price catalog


def test_node_class_zones_limit_the_offerings(provider: GCPProvider) -> None:
    types = provider.instance_types(gcp_node_class(zones=["us-central1-b"]))
    assert {o.zone for t in types for o in t.offerings} == {"us-central1-b"}


def test_overhead_and_boot_disk_shape_allocatable(provider: GCPProvider) -> None:
    it = by_name(provider.instance_types(gcp_node_class(boot_disk={"sizeGb": 200})))["n2-standard-8"]
    assert it.capacity["ephemeral-storage"] == 200 * 2**30
    assert 0 < it.allocatable[CPU] < it.capacity[CPU]
    assert 0 < it.allocatable[MEMORY] < it.capacity[MEMORY]


def test_a_node_class_of_another_project_is_not_ready(provider: GCPProvider) -> None:
    with pytest.raises(NodeClassNotReady, match=r"spec\.project"):
        provider.instance_types(gcp_node_class(project="someone-else"))


def test_a_stockout_seen_by_create_flags_the_offering_unavailable(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    nc = gcp_node_class(zones=["us-central1-a"])
    standin.stockout(machine_type="e2-standard-2", zone="us-central1-a", provisioning_model="STANDARD")
    types = provider.instance_types(nc)
    with pytest.raises(InsufficientCapacity):
        provider.create(node_claim("c1", ["e2-standard-2"], node_class=nc), types, nc)
    e2 = by_name(provider.instance_types(nc))["e2-standard-2"]
    availability = {o.capacity_type: o.available for o in e2.offerings}
    assert availability == {wk.CAPACITY_TYPE_ON_DEMAND: False, wk.CAPACITY_TYPE_SPOT: True}


def test_region_instance_types_cover_every_zone_of_the_region(provider: GCPProvider) -> None:
    types = provider.region_instance_types()
    assert {o.zone for t in types for o in t.offerings} == set(fixtures.ZONES)
    assert "a3-highgpu-8g" in by_name(types)


@pytest.mark.parametrize(
    ("type_name", "on_demand"),
    [("a3-ultragpu-8g", 84.806908), ("a4-highgpu-8g", 106.0), ("a2-megagpu-16g", 55.739)],
    ids=["a3-ultra", "a4", "a2-mega-16g"],
)
def test_the_2026_machines_are_priced_from_the_catalog(
    provider: GCPProvider, type_name: str, on_demand: float
) -> None:
    it = by_name(provider.instance_types(gcp_node_class()))[type_name]
    prices = {o.price for o in it.offerings if o.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND}
    assert prices == {on_demand}
