"""The one accelerator model: what pods ask and nodes offer across NVIDIA (whole and MIG), AMD and AWS
Neuron, the MIG layouts the GPU operator's MIG manager applies, and extended resources refused when they
are not whole numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from provisioner.api import accelerators, mig
from provisioner.api import labels as wk
from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.types import for_template, with_mig_layout
from testkit.builders.pods import pod

PROFILES = Path(__file__).parent.parent / "data" / "mig-profiles.yaml"
MODEL_OF_SMI_NAME = {"NVIDIA H100 80GB HBM3": "h100-80gb", "NVIDIA H200": "h200-141gb"}


@pytest.mark.parametrize(
    ("resources", "devices", "units", "gpus", "uses"),
    [
        ({wk.GPU_RESOURCE: 8}, 8, 8, 8, True),
        ({"amd.com/gpu": 2}, 2, 2, 2, True),
        ({"aws.amazon.com/neuron": 16, "aws.amazon.com/neuroncore": 32}, 16, 16, 16, True),
        ({"aws.amazon.com/neuroncore": 3}, 0, 2, 2, True),
        ({"nvidia.com/mig-1g.10gb": 1}, 0, 1, 1, True),
        ({"nvidia.com/mig-1g.10gb": 7}, 0, 7, 1, True),
        ({"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 1}, 0, 3, 1, True),
        ({"cpu": 4000, "memory": 2**30, "vpc.amazonaws.com/efa": 1}, 0, 0, 0, False),
    ],
    ids=["nvidia", "amd", "neuron", "neuroncores-only", "one-slice", "seven-slices", "mixed-slices", "cpu"],
)
def test_every_maker_counts_the_same_way(
    resources: dict[str, int], devices: int, units: int, gpus: int, uses: bool
) -> None:
    assert accelerators.devices(resources) == devices
    assert accelerators.units(resources) == units
    assert accelerators.gpus(resources) == gpus
    assert accelerators.uses_accelerators(resources) is uses


def test_a_pod_on_amd_or_neuron_is_a_gpu_pod_like_an_nvidia_one() -> None:
    for resource in ("nvidia.com/gpu", "amd.com/gpu", "aws.amazon.com/neuron", "nvidia.com/mig-1g.10gb"):
        p = pod(extra_requests={resource: "1"})
        assert p.gpus == 1, resource


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        ("nvidia.com/gpu", "0.5"),
        ("amd.com/gpu", "1.5"),
        ("aws.amazon.com/neuron", "500m"),
        ("nvidia.com/mig-1g.10gb", "0.25"),
        ("example.com/dongle", "1.1"),
    ],
)
def test_non_integer_extended_resources_are_refused_naming_the_field(resource: str, value: str) -> None:
    p = pod(extra_requests={resource: value})
    assert p.invalid.startswith(f"spec.containers[0].resources.requests.{resource}: {value!r} is not a whole")
    assert resource not in p.requests


def test_negative_gpus_are_refused_and_fractional_cpu_is_fine() -> None:
    assert "is negative" in pod(extra_requests={"nvidia.com/gpu": "-1"}).invalid
    p = pod(cpu="0.5", memory="1.5Gi")
    assert p.invalid == ""
    assert p.requests["cpu"] == 500


def test_extra_device_resources_hook_in_without_counting_as_gpus() -> None:
    try:
        accelerators.register_device("vpc.amazonaws.com/efa", "network")
        assert accelerators.is_device("vpc.amazonaws.com/efa")
        assert accelerators.asked({"vpc.amazonaws.com/efa": 4, "cpu": 1000}) == {"vpc.amazonaws.com/efa": 4}
        assert accelerators.units({"vpc.amazonaws.com/efa": 4}) == 0
    finally:
        accelerators.DEVICE_RESOURCES.pop("vpc.amazonaws.com/efa", None)
    assert not accelerators.is_device("vpc.amazonaws.com/efa")


def _measured() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = yaml.safe_load(PROFILES.read_text())
    return data


@pytest.mark.parametrize("gpu", _measured(), ids=lambda g: g["gpu"])
def test_mig_tables_match_the_profiles_measured_on_real_gpus(gpu: dict[str, Any]) -> None:
    model = MODEL_OF_SMI_NAME[gpu["gpu"]]
    measured = {p["name"]: (p["count"], p["memoryGiB"]) for p in gpu["profiles"] if "+me" not in p["name"]}
    ours = {p.name: (p.count, p.memory_gib) for p in mig.GPU_MODELS[model]}
    assert ours == measured


@pytest.mark.parametrize(
    ("it", "layout", "resources"),
    [
        ("p5.48xlarge", "all-1g.10gb", {"nvidia.com/mig-1g.10gb": 56}),
        ("p5.4xlarge", "all-1g.10gb", {"nvidia.com/mig-1g.10gb": 7}),
        ("p5.48xlarge", "all-3g.40gb", {"nvidia.com/mig-3g.40gb": 16}),
        (
            "p5.48xlarge",
            "all-balanced",
            {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8},
        ),
        ("p5en.48xlarge", "all-1g.18gb", {"nvidia.com/mig-1g.18gb": 56}),
        ("p4d.24xlarge", "all-1g.5gb", {"nvidia.com/mig-1g.5gb": 56}),
        ("p4de.24xlarge", "all-2g.20gb", {"nvidia.com/mig-2g.20gb": 24}),
        ("p5.48xlarge", "all-disabled", {wk.GPU_RESOURCE: 8}),
    ],
    ids=["h100x8-1g", "h100x1-1g", "h100-3g", "h100-balanced", "h200-1g", "a100-40-1g", "a100-80-2g", "off"],
)
def test_a_layout_turns_a_types_gpus_into_its_slices(it: str, layout: str, resources: dict[str, int]) -> None:
    types = {t.name: t for t in catalog.load("aws")}
    parted = with_mig_layout(types[it], layout)

    assert not isinstance(parted, str)
    assert {k: v for k, v in parted.capacity.items() if k.startswith("nvidia.com/")} == resources
    assert parted.labels[mig.MIG_CONFIG_LABEL] == layout
    assert parted.capacity["cpu"] == types[it].capacity["cpu"]


@pytest.mark.parametrize(
    ("it", "layout", "words"),
    [
        ("g6.xlarge", "all-1g.10gb", "g6.xlarge: l4 GPUs have no MIG (MIG-capable: a100, h100, h200)"),
        ("p5.48xlarge", "all-1g.5gb", "all-1g.5gb is not a layout of h100-80gb; use one of all-disabled"),
        ("m7i.large", "all-1g.10gb", "m7i.large has no NVIDIA GPUs to partition"),
    ],
    ids=["no-mig-on-l4", "a100-layout-on-h100", "cpu-type"],
)
def test_a_layout_that_cannot_apply_says_why(it: str, layout: str, words: str) -> None:
    types = {t.name: t for t in catalog.load("aws")}
    found = with_mig_layout(types[it], layout)
    assert isinstance(found, str) and words in found


def test_a_pool_layout_keeps_only_the_types_it_applies_to() -> None:
    types = [t for t in catalog.load("aws") if t.name in ("g6.xlarge", "p5.4xlarge", "m7i.large")]
    assert [t.name for t in for_template({mig.MIG_CONFIG_LABEL: "all-1g.10gb"}, types)] == ["p5.4xlarge"]
    assert for_template({}, types) == types


def test_mig_resources_name_the_layouts_that_make_them() -> None:
    assert mig.holders("nvidia.com/mig-1g.10gb") == [
        "a100-40gb/all-1g.10gb",
        "a100-80gb/all-1g.10gb",
        "a100-80gb/all-balanced",
        "h100-80gb/all-1g.10gb",
        "h100-80gb/all-balanced",
    ]


def test_devices_counts_every_whole_device_and_slices_every_mig_profile() -> None:
    resources = {name: i + 1 for i, name in enumerate(accelerators.WHOLE_DEVICES)}
    resources |= {"cpu": 4000, "nvidia.com/mig-1g.10gb": 3, "nvidia.com/mig-3g.40gb": 2}
    assert accelerators.devices(resources) == sum(range(1, len(accelerators.WHOLE_DEVICES) + 1))
    assert accelerators.slices(resources) == 5
    assert accelerators.devices({"cpu": 1}) == accelerators.slices({"cpu": 1}) == 0
