"""The built-in catalogs: shapes, GPUs, prices, offerings and overhead as the scheduler will see them."""

from __future__ import annotations

from typing import Any

import pytest

from providers.gcp import attached
from provisioner.api import labels as wk
from provisioner.api.quantities import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from provisioner.cloudprovider import catalog
from testkit.typed import present


def _by_name(name: str, region: str | None = None) -> dict[str, Any]:
    return {t.name: t for t in catalog.load(name, region)}


def test_p5_48xlarge_has_eight_h100_with_80_gib_each() -> None:
    p5 = _by_name("aws")["p5.48xlarge"]
    assert p5.gpu is not None
    assert (p5.gpu.name, p5.gpu.count, p5.gpu.memory_mib) == ("h100", 8, 81920)
    assert p5.capacity[wk.GPU_RESOURCE] == 8
    assert p5.labels[wk.GPU_NAME] == "h100"
    assert p5.labels[wk.GPU_COUNT] == "8"
    assert p5.labels[wk.GPU_MEMORY] == "81920"


@pytest.mark.parametrize(
    ("cloud", "name", "gpu", "count", "memory_mib"),
    [
        ("aws", "p4d.24xlarge", "a100", 8, 40960),
        ("aws", "p4de.24xlarge", "a100", 8, 81920),
        ("aws", "p3.16xlarge", "v100", 8, 16384),
        ("aws", "g6.xlarge", "l4", 1, 22888),
        ("aws", "g6e.48xlarge", "l40s", 8, 45776),
        ("aws", "g5.12xlarge", "a10g", 4, 22888),
        ("aws", "g4dn.xlarge", "t4", 1, 16384),
        ("gcp", "a3-highgpu-8g", "h100", 8, 81920),
        ("gcp", "a2-highgpu-1g", "a100", 1, 40960),
        ("gcp", "a2-ultragpu-8g", "a100", 8, 81920),
        ("gcp", "g2-standard-24", "l4", 2, 24576),
        ("gcp", "n1-standard-8-t4x1", "t4", 1, 16384),
        ("gcp", "n1-standard-32-v100x4", "v100", 4, 16384),
        ("aws", "p5.4xlarge", "h100", 1, 81920),
        ("aws", "p5en.48xlarge", "h200", 8, 144384),
        ("aws", "p6-b200.48xlarge", "b200", 8, 183359),
        ("aws", "gr6.8xlarge", "l4", 1, 22888),
        ("gcp", "a3-megagpu-8g", "h100", 8, 81920),
        ("gcp", "a3-ultragpu-8g", "h200", 8, 144384),
        ("gcp", "a4-highgpu-8g", "b200", 8, 184320),
        ("gcp", "a2-megagpu-16g", "a100", 16, 40960),
    ],
    ids=lambda v: str(v),
)
def test_gpu_types_carry_their_accelerators(
    cloud: str, name: str, gpu: str, count: int, memory_mib: int
) -> None:
    t = _by_name(cloud)[name]
    assert t.gpu is not None
    assert (t.gpu.name, t.gpu.count, t.gpu.memory_mib) == (gpu, count, memory_mib)
    assert t.capacity[wk.GPU_RESOURCE] == count


def test_cpu_types_have_no_gpu_resource() -> None:
    m5 = _by_name("aws")["m5.large"]
    assert m5.gpu is None
    assert wk.GPU_RESOURCE not in m5.capacity
    assert wk.GPU_NAME not in m5.labels


def test_karpenter_benchmark_has_400_types_with_five_offerings_each() -> None:
    types = catalog.load("karpenter-benchmark")
    assert len(types) == 400
    for i, t in enumerate(sorted(types, key=lambda t: t.vcpu)):
        assert t.vcpu == i + 1
        assert t.capacity[MEMORY] == 2 * (i + 1) * 2**30
        assert t.capacity[PODS] == 10 * (i + 1)
        assert t.capacity[EPHEMERAL_STORAGE] == 20 * 2**30
        assert t.overhead == {CPU: 100, MEMORY: 10 * 2**20}
        assert sorted((o.capacity_type, o.zone) for o in t.offerings) == [
            ("on-demand", "zone-1"),
            ("on-demand", "zone-2"),
            ("on-demand", "zone-3"),
            ("spot", "zone-1"),
            ("spot", "zone-2"),
        ]
        assert all(o.price == pytest.approx(0.1 * (i + 1) + 0.1 * 2 * (i + 1)) for o in t.offerings)


@pytest.mark.parametrize("cloud", ["aws", "gcp", "karpenter-benchmark"])
def test_every_type_has_allocatable_below_capacity(cloud: str) -> None:
    for t in catalog.load(cloud):
        assert 0 < t.allocatable[CPU] < t.capacity[CPU], t.name
        assert 0 < t.allocatable[MEMORY] < t.capacity[MEMORY], t.name


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_every_type_is_offered_spot_and_on_demand_in_every_zone(cloud: str) -> None:
    zones = catalog.zones(cloud)
    for t in catalog.load(cloud):
        keys = sorted(o.key for o in t.offerings)
        assert keys == sorted([(z, "spot") for z in zones] + [(z, "on-demand") for z in zones]), t.name
        spot = {o.price for o in t.offerings if o.capacity_type == "spot"}
        on_demand = {o.price for o in t.offerings if o.capacity_type == "on-demand"}
        assert max(spot) < min(on_demand), t.name


def test_types_carry_the_region_and_instance_labels() -> None:
    t = _by_name("aws", "us-west-2")["m6i.xlarge"]
    assert t.labels[wk.REGION] == "us-west-2"
    assert t.labels[wk.INSTANCE_TYPE] == "m6i.xlarge"
    assert t.labels[wk.INSTANCE_FAMILY] == "m6i"
    assert {o.zone for o in t.offerings} == set(catalog.zones("aws", "us-west-2"))


def test_gcp_attached_gpu_names_split_into_machine_and_accelerator() -> None:
    assert attached.gcp_machine("n1-standard-8-t4x1") == ("n1-standard-8", "nvidia-tesla-t4", 1)
    assert attached.gcp_machine("n1-standard-64-v100x8") == ("n1-standard-64", "nvidia-tesla-v100", 8)
    assert attached.gcp_machine("a3-highgpu-8g") == ("a3-highgpu-8g", None, 0)
    assert attached.gcp_attached_name("n1-standard-8", "nvidia-tesla-t4", 1) == "n1-standard-8-t4x1"
    assert _by_name("gcp")["n1-standard-8-t4x1"].labels[wk.INSTANCE_FAMILY] == "n1-standard"


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        ("H100", "h100"),
        ("A10G", "a10g"),
        ("L40S", "l40s"),
        ("nvidia-tesla-t4", "t4"),
        ("nvidia-h100-80gb", "h100"),
    ],
)
def test_gpu_names_normalise_to_label_values(raw: str, label: str) -> None:
    assert catalog.gpu_label_name(raw) == label


def test_prices_and_shapes_are_available_without_offerings() -> None:
    assert catalog.on_demand_price("aws", "p5.48xlarge", "us-east-1") == pytest.approx(55.04)
    assert present(catalog.spot_price("aws", "p5.48xlarge", "us-east-1")) < present(
        catalog.on_demand_price("aws", "p5.48xlarge")
    )
    assert catalog.on_demand_price("aws", "no.such", "us-east-1") is None
    assert catalog.on_demand_price("aws", "m5.large", "mars-1") is None
    shape = catalog.shape("gcp", "n1-standard-8-t4x1")
    assert shape is not None
    assert (shape.machine_type, shape.accelerator_type, shape.attach_accelerator) == (
        "n1-standard-8",
        "nvidia-tesla-t4",
        True,
    )
    assert catalog.shape("aws", "no.such") is None


def test_unknown_catalog_or_region_names_what_is_allowed() -> None:
    with pytest.raises(catalog.CatalogError, match="aws, gcp, karpenter-benchmark"):
        catalog.load("azure")
    with pytest.raises(catalog.CatalogError, match="us-east-1"):
        catalog.load("aws", "mars-1")


@pytest.mark.parametrize(
    ("cloud", "name", "on_demand"),
    [
        ("aws", "p5.4xlarge", 6.88),
        ("aws", "p5en.48xlarge", 63.296),
        ("aws", "p6-b200.48xlarge", 113.9328),
        ("gcp", "a3-ultragpu-8g", 84.806908),
        ("gcp", "a4-highgpu-8g", 106.0),
        ("gcp", "a2-megagpu-16g", 55.739),
    ],
)
def test_the_2026_types_carry_their_list_prices(cloud: str, name: str, on_demand: float) -> None:
    assert catalog.on_demand_price(cloud, name) == on_demand


@pytest.mark.parametrize(
    ("name", "resources", "manufacturer"),
    [
        ("trn1.32xlarge", {"aws.amazon.com/neuron": 16, "aws.amazon.com/neuroncore": 32}, "aws"),
        ("inf2.48xlarge", {"aws.amazon.com/neuron": 12, "aws.amazon.com/neuroncore": 24}, "aws"),
        ("g4ad.16xlarge", {"amd.com/gpu": 4}, "amd"),
    ],
)
def test_neuron_and_amd_types_offer_their_devices(
    name: str, resources: dict[str, int], manufacturer: str
) -> None:
    t = _by_name("aws")[name]
    assert {k: v for k, v in t.capacity.items() if "/" in k} == resources
    assert t.labels[wk.GPU_MANUFACTURER] == manufacturer


def test_a_type_the_region_does_not_offer_is_left_out_of_it() -> None:
    assert "p5e.48xlarge" not in _by_name("aws", "us-east-1")
    assert "p5e.48xlarge" in _by_name("aws", "us-east-2")
    assert "trn2.48xlarge" in _by_name("aws", "us-east-2")
    assert "trn2.48xlarge" not in _by_name("aws", "us-west-2")
