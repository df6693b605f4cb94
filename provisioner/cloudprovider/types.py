"""Machine shapes and their offerings: what a cloud can launch, where, how, and at what price.

Pure values (frozen dataclasses, fast to compare and hash): the scheduler ranks them, providers build
them from their APIs or catalogs, and nothing here performs I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from provisioner.api import labels, mig
from provisioner.api.quantities import CPU, MEMORY, PODS, ResourceList
from provisioner.cloudprovider.errors import OfferingKey


@dataclass(frozen=True, slots=True)
class GPU:
    """The accelerators of one instance type."""

    name: str
    """Lowercase model name, the same on every cloud (`h100`, `a100`, `l4`, `t4`...)."""
    count: int
    memory_mib: int
    """Memory per GPU, MiB."""
    manufacturer: str = "nvidia"
    """`nvidia`, `amd`, or `aws` (Neuron devices: Trainium, Inferentia)."""
    cores: int = 0
    """Cores per device where the device plugin advertises them too (NeuronCores), else 0."""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, "memoryMiB": self.memory_mib}


@dataclass(frozen=True, slots=True)
class Offering:
    """One way to buy an instance type: a zone and a capacity type, at a price, available or not."""

    zone: str
    capacity_type: str
    """`spot`, `on-demand` or `reserved`."""
    price: float
    """$/h."""
    available: bool = True
    """False when the cloud (or the unavailable-offerings cache) says there is no capacity now."""
    reservation: Reservation | None = None
    """For a `reserved` offering: the reservation it launches into (one offering per reservation)."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.zone, self.capacity_type)

    def offering_key(self, instance_type: str) -> OfferingKey:
        """The key caches and capacity errors name this offering by (the reservation's id included)."""
        return OfferingKey(
            instance_type, self.zone, self.capacity_type, self.reservation.id if self.reservation else ""
        )


@dataclass(frozen=True, slots=True)
class Reservation:
    """Capacity already paid for: an AWS capacity reservation or Capacity Block, a GCP reservation.

    Its offering's price is zero (the marginal cost of using it: the money is spent either way);
    `hourly_price` is what it costs per instance-hour whether used or not, for the idle-cost reports.
    """

    id: str
    kind: str = "default"
    """`default` (an On-Demand Capacity Reservation, a GCP reservation) or `capacity-block`."""
    free: int = 0
    """Instances it can still take now."""
    total: int = 0
    """Instances it holds in all."""
    ends_at: datetime | None = None
    """When it ends (a Capacity Block's end; None: open-ended). Nodes in it are drained before."""
    hourly_price: float = 0.0
    """$/h per instance, paid whether used or not."""


@dataclass(frozen=True, slots=True)
class InstanceType:
    """A machine shape and its offerings.

    `capacity` is what the machine has; `overhead` what kubelet, the system and the eviction threshold
    reserve; `allocatable` what pods may use. Resources are integers in base units (cpu in millicores).
    `labels` hold every well-known label a node of this type carries except zone and capacity type,
    which come from the offering.
    """

    name: str
    capacity: ResourceList
    overhead: ResourceList = field(default_factory=dict)
    offerings: tuple[Offering, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    gpu: GPU | None = None

    @property
    def allocatable(self) -> ResourceList:
        return {name: amount - self.overhead.get(name, 0) for name, amount in self.capacity.items()}

    @property
    def vcpu(self) -> int:
        return self.capacity.get(CPU, 0) // 1000

    @property
    def memory_mib(self) -> int:
        return self.capacity.get(MEMORY, 0) // 2**20

    @property
    def max_pods(self) -> int:
        return self.capacity.get(PODS, 110)

    def cheapest(
        self, *, zones: set[str] | None = None, capacity_types: set[str] | None = None
    ) -> Offering | None:
        """The cheapest available offering in the given zones and capacity types (all when None)."""
        best: Offering | None = None
        for o in self.offerings:
            if not o.available:
                continue
            if zones is not None and o.zone not in zones:
                continue
            if capacity_types is not None and o.capacity_type not in capacity_types:
                continue
            if best is None or (o.price, o.zone, o.capacity_type, _rid(o)) < (
                best.price,
                best.zone,
                best.capacity_type,
                _rid(best),
            ):
                best = o
        return best

    def with_offerings(self, offerings: tuple[Offering, ...]) -> InstanceType:
        return replace(self, offerings=offerings)


def with_mig_layout(it: InstanceType, layout: str) -> InstanceType | str:
    """The type as a node partitioned by the MIG manager with `layout` (the pool's `nvidia.com/mig.config`)
    offers it: its `nvidia.com/gpu` replaced by the layout's `nvidia.com/mig-<profile>` resources, the
    layout among its labels. A str says why the layout cannot apply to this type."""
    gpu = it.gpu
    if gpu is None or gpu.manufacturer != "nvidia" or gpu.count <= 0:
        return f"{it.name} has no NVIDIA GPUs to partition"
    found = mig.layout_resources(
        gpu_name=gpu.name, memory_mib=gpu.memory_mib, gpu_count=gpu.count, layout=layout
    )
    if isinstance(found, str):
        return f"{it.name}: {found}"
    capacity = {k: v for k, v in it.capacity.items() if k != mig.WHOLE_GPU}
    capacity.update(found)
    return replace(it, capacity=capacity, labels={**it.labels, mig.MIG_CONFIG_LABEL: layout})


def gpu_summary(it: InstanceType) -> dict[str, Any] | None:
    """The type's GPUs for output (`GPU.to_dict`), with its MIG layout and slices when it has one."""
    if it.gpu is None:
        return None
    out = it.gpu.to_dict()
    layout = mig.layout_of(it.labels)
    if layout is not None:
        out["migConfig"] = layout
        out["slices"] = {
            k: v for k, v in sorted(it.capacity.items()) if k.startswith(mig.MIG_RESOURCE_PREFIX)
        }
    return out


def for_template(template_labels: Mapping[str, str], types: Iterable[InstanceType]) -> list[InstanceType]:
    """The types as nodes with these template labels offer them: with a MIG layout
    (`nvidia.com/mig.config`), each type partitioned by it, and the types it cannot apply to left out;
    without one, the types unchanged."""
    layout = mig.layout_of(template_labels)
    if layout is None:
        return list(types)
    out = []
    for it in types:
        found = with_mig_layout(it, layout)
        if not isinstance(found, str):
            out.append(found)
    return out


def _rid(o: Offering) -> str:
    return o.reservation.id if o.reservation else ""


def instance_labels(
    *,
    name: str,
    vcpu: int,
    memory_mib: int,
    arch: str = "amd64",
    region: str | None = None,
    gpu: GPU | None = None,
) -> dict[str, str]:
    """The well-known labels of an instance type (providers and catalogs share this)."""
    out = {
        labels.INSTANCE_TYPE: name,
        labels.INSTANCE_FAMILY: name.split(".")[0] if "." in name else name.rsplit("-", 1)[0],
        labels.INSTANCE_CPU: str(vcpu),
        labels.INSTANCE_MEMORY: str(memory_mib),
        labels.ARCH: arch,
        labels.OS: "linux",
    }
    if region:
        out[labels.REGION] = region
    if gpu is not None:
        out[labels.GPU_NAME] = gpu.name
        out[labels.GPU_COUNT] = str(gpu.count)
        out[labels.GPU_MEMORY] = str(gpu.memory_mib)
        out[labels.GPU_MANUFACTURER] = gpu.manufacturer
    return out
