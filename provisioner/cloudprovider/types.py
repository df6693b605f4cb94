"""Machine shapes and their offerings: what a cloud can launch, where, how, and at what price.

Pure values (frozen dataclasses, fast to compare and hash): the scheduler ranks them, providers build
them from their APIs or catalogs, and nothing here performs I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from provisioner.api import labels
from provisioner.api.quantities import CPU, MEMORY, PODS, ResourceList


@dataclass(frozen=True, slots=True)
class GPU:
    """The accelerators of one instance type."""

    name: str
    """Lowercase model name, the same on every cloud (`h100`, `a100`, `l4`, `t4`...)."""
    count: int
    memory_mib: int
    """Memory per GPU, MiB."""
    manufacturer: str = "nvidia"

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

    @property
    def key(self) -> tuple[str, str]:
        return (self.zone, self.capacity_type)


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
            if best is None or (o.price, o.zone, o.capacity_type) < (
                best.price,
                best.zone,
                best.capacity_type,
            ):
                best = o
        return best

    def with_offerings(self, offerings: tuple[Offering, ...]) -> InstanceType:
        return replace(self, offerings=offerings)


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
