"""The built-in catalogs: instance shapes, GPUs and list prices per cloud, as InstanceTypes.

Owns the reading of the catalog files the provider plug-ins ship as package data (`catalogs` of each
plug-in, e.g. providers/aws/catalog.yaml: shapes, GPUs, on-demand list prices and a typical spot discount,
with their source and date in each file's header) and the synthetic `karpenter-benchmark` catalog of
../shared/BENCHMARKS.md section 1. The fake provider serves these catalogs; the cloud providers read
shapes from their APIs and fall back here for prices (`on_demand_price`, `spot_price`) and for anything
their API does not say (`shape`).

A row may name a machine type and an accelerator to attach (`MachineShape.machine_type`, `accelerator_type`):
a cloud's plug-in reads them to launch a type its catalog composes from a machine and GPUs.

Reads only the plug-ins' data files; never the clock, the environment or the network.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from provisioner.api import accelerators, labels
from provisioner.api.plugins import CATALOG_FILES
from provisioner.api.quantities import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, ResourceList
from provisioner.cloudprovider import overhead as overhead_
from provisioner.cloudprovider.types import GPU, InstanceType, Offering, instance_labels

MIB = 2**20
GIB = 2**30

BENCHMARK = "karpenter-benchmark"

# BENCHMARKS.md section 1, verbatim.
_BENCH_TYPES = 400
_BENCH_REGION = "region-1"
_BENCH_ZONES = ("zone-1", "zone-2", "zone-3")
_BENCH_SPOT_ZONES = ("zone-1", "zone-2")
_BENCH_OVERHEAD: ResourceList = {CPU: 100, MEMORY: 10 * MIB}


class CatalogError(ValueError):
    """An unknown catalog, region or instance type; the message lists what is allowed."""


@dataclass(frozen=True, slots=True)
class MachineShape:
    """An instance type without its offerings: what a catalog row says."""

    name: str
    vcpu: int
    memory_mib: int
    max_pods: int
    arch: str = "amd64"
    gpu: GPU | None = None
    machine_type: str | None = None
    """The machine type to launch, when it differs from `name` (a machine with attached GPUs); its
    family names the type's family label."""
    accelerator_type: str | None = None
    """The cloud's accelerator type (`nvidia-tesla-t4`, `nvidia-h100-80gb`...), when the row names one."""
    attach_accelerator: bool = False
    """True when the accelerator is attached at launch rather than part of the machine type."""
    accelerator_count: int = 0
    """How many of `accelerator_type` the row names."""


def names() -> list[str]:
    """Every built-in catalog: those the installed plug-ins ship (`aws`, `gcp`), `karpenter-benchmark`."""
    return [*CATALOG_FILES, BENCHMARK]


def regions(name: str) -> list[str]:
    """Regions the catalog prices."""
    if name == BENCHMARK:
        return [_BENCH_REGION]
    return list(_data(name)["regions"])


def default_region(name: str) -> str:
    """The region used when none is given (`us-east-1`, `us-central1`, `region-1`)."""
    if name == BENCHMARK:
        return _BENCH_REGION
    return str(_data(name)["defaultRegion"])


def zones(name: str, region: str | None = None) -> list[str]:
    """The zones of a region (the default region when None), sorted."""
    if name == BENCHMARK:
        _check_region(name, region or _BENCH_REGION)
        return list(_BENCH_ZONES)
    region = region or default_region(name)
    _check_region(name, region)
    return sorted(_data(name)["regions"][region]["zones"])


def shape(cloud: str, instance_type: str) -> MachineShape | None:
    """The shape of a catalog type, or None when the catalog does not list it."""
    if cloud == BENCHMARK:
        i = _bench_index(instance_type)
        return (
            None
            if i is None
            else MachineShape(
                name=instance_type, vcpu=i + 1, memory_mib=2048 * (i + 1), max_pods=10 * (i + 1)
            )
        )
    row = _rows(cloud).get(instance_type)
    return None if row is None else _shape(row)


def on_demand_price(cloud: str, instance_type: str, region: str | None = None) -> float | None:
    """The on-demand list price in $/h, or None when the catalog does not price this type or region."""
    if cloud == BENCHMARK:
        s = shape(cloud, instance_type)
        return None if s is None else _bench_price(s.vcpu)
    row = _rows(cloud).get(instance_type)
    region = region or default_region(cloud)
    reg = _data(cloud)["regions"].get(region)
    if row is None or reg is None:
        return None
    return round(float(row["onDemand"]) * float(reg.get("priceFactor", 1.0)), 6)


def spot_price(
    cloud: str,
    instance_type: str,
    region: str | None = None,
    zone: str | None = None,
) -> float | None:
    """A typical spot price in $/h (on-demand times the family's spot factor; the same in every zone of
    the region, so `zone` is accepted for symmetry), or None when unknown."""
    del zone  # the built-in data has no per-zone spot prices; see the data files' headers
    od = on_demand_price(cloud, instance_type, region)
    if od is None or cloud == BENCHMARK:
        return od
    factors = _data(cloud)["spotFactor"]
    family = _family(instance_type)
    return round(od * float(factors.get(family, factors["default"])), 6)


def gpu_label_name(raw: str) -> str:
    """A cloud's GPU model name as the label value: `NVIDIA H100 80GB`, `nvidia-h100-80gb`, `H100` -> `h100`.

    Providers call this on DescribeInstanceTypes' GpuInfo names and GCE accelerator types.
    """
    text = raw.lower()
    if text in ACCELERATOR_SHORT_NAMES:
        return ACCELERATOR_SHORT_NAMES[text]
    for name in sorted(labels.GPU_NAMES, key=len, reverse=True):
        if re.search(rf"(^|[^a-z0-9]){re.escape(name)}($|[^a-z0-9])", text):
            return name
    return re.sub(r"[^a-z0-9.-]+", "-", text.replace("nvidia", "").strip(" -")) or text


def make_instance_type(
    *,
    name: str,
    vcpu: int,
    memory_mib: int,
    max_pods: int,
    offerings: tuple[Offering, ...] | list[Offering],
    region: str | None = None,
    arch: str = "amd64",
    gpu: GPU | None = None,
    ephemeral_storage: int | None = 20 * GIB,
    overhead_formula: str = "eks",
    family: str | None = None,
) -> InstanceType:
    """One InstanceType with the project's labels, capacity and overhead: the shared constructor the
    catalogs and the AWS/GCP providers use so every cloud's types look alike to the scheduler."""
    capacity: ResourceList = {CPU: vcpu * 1000, MEMORY: memory_mib * MIB, PODS: max_pods}
    if ephemeral_storage is not None:
        capacity[EPHEMERAL_STORAGE] = ephemeral_storage
    if gpu is not None:
        capacity.update(
            accelerators.device_resources(manufacturer=gpu.manufacturer, count=gpu.count, cores=gpu.cores)
        )
    type_labels = instance_labels(
        name=name, vcpu=vcpu, memory_mib=memory_mib, arch=arch, region=region, gpu=gpu
    )
    if family:
        type_labels[labels.INSTANCE_FAMILY] = family
    return InstanceType(
        name=name,
        capacity=capacity,
        overhead=overhead_.overhead(
            vcpu=vcpu,
            memory_mib=memory_mib,
            max_pods=max_pods,
            ephemeral_storage=ephemeral_storage,
            formula=overhead_formula,
        ),
        offerings=tuple(offerings),
        labels=type_labels,
        gpu=gpu,
    )


def load(name: str, region: str | None = None) -> list[InstanceType]:
    """Every type of a built-in catalog offered in a region (its default when None; a row's `regions`
    lists where it is offered, else everywhere), with a spot and an on-demand offering in each zone of the
    region, all available, sorted by name."""
    if name == BENCHMARK:
        _check_region(name, region or _BENCH_REGION)
        return _benchmark()
    data = _data(name)
    region = region or default_region(name)
    _check_region(name, region)
    region_zones = zones(name, region)
    formula = str(data.get("overheadFormula", "eks"))
    storage = int(data.get("ephemeralStorageGiB", 20)) * GIB
    out: list[InstanceType] = []
    for type_name, row in sorted(_rows(name).items()):
        if "regions" in row and region not in row["regions"]:
            continue  # the cloud does not offer this type in this region
        s = _shape(row)
        od = on_demand_price(name, type_name, region)
        sp = spot_price(name, type_name, region)
        assert od is not None and sp is not None  # every row has a price; the region was checked above
        offerings = [
            Offering(zone=z, capacity_type=labels.CAPACITY_TYPE_SPOT, price=sp) for z in region_zones
        ]
        offerings += [
            Offering(zone=z, capacity_type=labels.CAPACITY_TYPE_ON_DEMAND, price=od) for z in region_zones
        ]
        out.append(
            make_instance_type(
                name=type_name,
                vcpu=s.vcpu,
                memory_mib=s.memory_mib,
                max_pods=s.max_pods,
                offerings=offerings,
                region=region,
                arch=s.arch,
                gpu=s.gpu,
                ephemeral_storage=storage,
                overhead_formula=formula,
                family=_family_label(name, type_name, s),
            )
        )
    return out


# --- internals -------------------------------------------------------------------------------------------

ACCELERATOR_SHORT_NAMES = {
    "nvidia-tesla-t4": "t4",
    "nvidia-tesla-v100": "v100",
    "nvidia-tesla-p100": "p100",
    "nvidia-tesla-p4": "p4",
    "nvidia-tesla-k80": "k80",
    "nvidia-tesla-a100": "a100",
    "nvidia-a100-80gb": "a100",
    "nvidia-h100-80gb": "h100",
    "nvidia-h100-mega-80gb": "h100",
    "nvidia-h200-141gb": "h200",
    "nvidia-l4": "l4",
    "nvidia-b200": "b200",
}


@functools.cache
def _data(name: str) -> dict[str, Any]:
    if name not in CATALOG_FILES:
        raise CatalogError(f"unknown catalog {name!r}: use one of {', '.join(names())}")
    file = CATALOG_FILES[name]
    text = resources.files(file.package).joinpath(file.file).read_text(encoding="utf-8")
    # The C loader when libyaml is present: the pure-Python one takes about a second on the gcp catalog.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data: dict[str, Any] = yaml.load(text, Loader=loader)
    return data


@functools.cache
def _rows(name: str) -> dict[str, dict[str, Any]]:
    return {str(row["name"]): row for row in _data(name)["types"]}


def _check_region(name: str, region: str) -> None:
    allowed = regions(name)
    if region not in allowed:
        raise CatalogError(f"catalog {name!r} has no region {region!r}: use one of {', '.join(allowed)}")


def _shape(row: dict[str, Any]) -> MachineShape:
    gpu_row = row.get("gpu")
    gpu = (
        GPU(
            name=str(gpu_row["name"]),
            count=int(gpu_row["count"]),
            memory_mib=int(gpu_row["memoryMiB"]),
            manufacturer=str(gpu_row.get("manufacturer", "nvidia")),
            cores=int(gpu_row.get("cores", 0)),
        )
        if gpu_row
        else None
    )
    accel = row.get("gceAccelerator") or {}
    return MachineShape(
        name=str(row["name"]),
        vcpu=int(row["vcpu"]),
        memory_mib=int(row["memoryMiB"]),
        max_pods=int(row["maxPods"]),
        arch=str(row.get("arch", "amd64")),
        gpu=gpu,
        machine_type=str(row["machineType"]) if "machineType" in row else None,
        accelerator_type=str(accel["type"]) if accel else None,
        attach_accelerator=bool(accel.get("attach", False)),
        accelerator_count=int(accel.get("count", 0)) if accel else 0,
    )


def _family(instance_type: str) -> str:
    """The spot-factor family: `p5` for `p5.48xlarge`, `a3` for `a3-highgpu-8g`, `n1` for n1 + GPU."""
    if "." in instance_type:
        return instance_type.split(".", 1)[0]
    return instance_type.split("-", 1)[0]


def _family_label(cloud: str, type_name: str, s: MachineShape) -> str | None:
    if s.machine_type:
        # n1-standard-8-t4x1 belongs to the n1-standard family, like the machine it launches.
        return s.machine_type.rsplit("-", 1)[0]
    return None


def _bench_index(instance_type: str) -> int | None:
    prefix = "fake-it-"
    if not instance_type.startswith(prefix) or not instance_type[len(prefix) :].isdigit():
        return None
    i = int(instance_type[len(prefix) :])
    return i if 0 <= i < _BENCH_TYPES else None


def _bench_price(vcpu: int) -> float:
    # 0.1 per vCPU + 0.1 per GiB, memory being 2 GiB per vCPU.
    return round(0.1 * vcpu + 0.1 * 2 * vcpu, 6)


def _benchmark() -> list[InstanceType]:
    out = []
    for i in range(_BENCH_TYPES):
        vcpu, memory_mib, pods = i + 1, 2048 * (i + 1), 10 * (i + 1)
        name = f"fake-it-{i}"
        price = _bench_price(vcpu)
        offerings = tuple(
            [
                Offering(zone=z, capacity_type=labels.CAPACITY_TYPE_SPOT, price=price)
                for z in _BENCH_SPOT_ZONES
            ]
            + [
                Offering(zone=z, capacity_type=labels.CAPACITY_TYPE_ON_DEMAND, price=price)
                for z in _BENCH_ZONES
            ]
        )
        out.append(
            InstanceType(
                name=name,
                # BENCHMARKS.md gives no disk; 20 GiB (Karpenter's default root volume) keeps every type's
                # capacity the same shape, and no benchmark pod asks for it.
                capacity={
                    CPU: vcpu * 1000,
                    MEMORY: memory_mib * MIB,
                    PODS: pods,
                    EPHEMERAL_STORAGE: 20 * GIB,
                },
                overhead=dict(_BENCH_OVERHEAD),
                offerings=offerings,
                labels=instance_labels(name=name, vcpu=vcpu, memory_mib=memory_mib, region=_BENCH_REGION),
                gpu=None,
            )
        )
    return out
