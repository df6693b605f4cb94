"""Instance types from what Compute Engine lists: machine types per zone (with their built-in
accelerators: a2, a3, g2...) and accelerator types per zone (for T4/V100/P100/P4 attached to n1).

Pure: takes plain values the provider read from the API, the allowed zones, the boot disk size and the
offerings known to be out of capacity, and returns InstanceTypes built by the catalog's shared
constructor, priced from the built-in catalog. An n1 machine with attached GPUs is its own instance type,
named as the catalog names it (`n1-standard-8-t4x1`), so the scheduler can choose it like any other.
Shared-core, deprecated and unpriced machine types are left out (the caller logs how many).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from providers.gcp import attached, gpus
from provisioner.api import labels
from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.types import GPU, InstanceType, Offering

GIB = 2**30
MAX_PODS = 110
CLOUD = "gcp"


@dataclass(frozen=True, slots=True)
class Machine:
    """One machine type as listed in one zone."""

    name: str
    zone: str
    vcpu: int
    memory_mib: int
    accelerators: tuple[tuple[str, int], ...] = ()
    shared_cpu: bool = False
    architecture: str = "X86_64"
    deprecated: bool = False


@dataclass(frozen=True, slots=True)
class MachineLaunch:
    """What instances.insert needs for an instance type: the machine type and what to attach."""

    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = 0
    gpu: bool = False
    """The machine has GPUs (built-in or attached): no live migration."""


@dataclass
class Built:
    """The result: instance types plus how to launch each and what was left out."""

    types: list[InstanceType] = field(default_factory=list)
    launches: dict[str, MachineLaunch] = field(default_factory=dict)
    skipped_unpriced: list[str] = field(default_factory=list)


def _arch(architecture: str) -> str:
    return "arm64" if architecture.upper() in ("ARM64", "AARCH64") else "amd64"


def _offerings(
    name: str,
    zones: Iterable[str],
    *,
    region: str,
    unavailable: Collection[OfferingKey],
) -> tuple[Offering, ...] | None:
    od = catalog.on_demand_price(CLOUD, name, region)
    spot = catalog.spot_price(CLOUD, name, region)
    if od is None or spot is None:
        return None
    out: list[Offering] = []
    for zone in sorted(zones):
        for capacity_type, price in ((labels.CAPACITY_TYPE_SPOT, spot), (labels.CAPACITY_TYPE_ON_DEMAND, od)):
            out.append(
                Offering(
                    zone=zone,
                    capacity_type=capacity_type,
                    price=price,
                    available=OfferingKey(name, zone, capacity_type) not in unavailable,
                )
            )
    return tuple(out)


def build(
    machines: Iterable[Machine],
    accelerators: Mapping[str, Mapping[str, int]],
    *,
    region: str,
    zones: Iterable[str],
    boot_disk_gib: int,
    unavailable: Collection[OfferingKey] = (),
) -> Built:
    """Instance types for `zones` of `region`. `accelerators` is zone -> accelerator type -> most cards
    per instance; `unavailable` holds the offerings to flag unavailable."""
    allowed = set(zones)
    by_name: dict[str, list[Machine]] = {}
    for m in machines:
        if m.zone in allowed and not m.shared_cpu and not m.deprecated:
            by_name.setdefault(m.name, []).append(m)
    built = Built()
    storage = boot_disk_gib * GIB

    def add(name: str, m: Machine, zones_: set[str], gpu: GPU | None, launch: MachineLaunch) -> None:
        offerings = _offerings(name, zones_, region=region, unavailable=unavailable)
        if offerings is None:
            built.skipped_unpriced.append(name)
            return
        family = m.name.rsplit("-", 1)[0] if launch.accelerator_type else None
        built.types.append(
            catalog.make_instance_type(
                name=name,
                vcpu=m.vcpu,
                memory_mib=m.memory_mib,
                max_pods=MAX_PODS,
                offerings=offerings,
                region=region,
                arch=_arch(m.architecture),
                gpu=gpu,
                ephemeral_storage=storage,
                overhead_formula="gke",
                family=family,
            )
        )
        built.launches[name] = launch

    for name, listed in sorted(by_name.items()):
        m = listed[0]
        machine_zones = {x.zone for x in listed}
        gpu = None
        if m.accelerators:
            acc_type, count = m.accelerators[0]
            gpu = gpus.gpu(acc_type, count)
        add(name, m, machine_zones, gpu, MachineLaunch(machine_type=name, gpu=gpu is not None))
        if not name.startswith(gpus.ATTACH_FAMILY) or m.accelerators:
            continue
        # n1 + attached GPU: one type per (accelerator, allowed count), in the zones that have both.
        combos: dict[tuple[str, int], set[str]] = {}
        for zone in machine_zones:
            for acc_type, max_cards in accelerators.get(zone, {}).items():
                for count in gpus.attach_counts(acc_type, vcpu=m.vcpu, max_cards=max_cards):
                    combos.setdefault((acc_type, count), set()).add(zone)
        for (acc_type, count), combo_zones in sorted(combos.items()):
            combo = attached.gcp_attached_name(name, acc_type, count)
            launch = MachineLaunch(
                machine_type=name, accelerator_type=acc_type, accelerator_count=count, gpu=True
            )
            add(combo, m, combo_zones, gpus.gpu(acc_type, count), launch)
    built.types.sort(key=lambda t: t.name)
    return built


def launch_of(instance_type: str) -> MachineLaunch:
    """How to launch a type by its name alone (when it was not built here): the catalog knows combos."""
    machine_type, acc_type, count = attached.gcp_machine(instance_type)
    shape = catalog.shape(CLOUD, instance_type)
    has_gpu = bool(acc_type) or (shape is not None and shape.gpu is not None)
    return MachineLaunch(
        machine_type=machine_type, accelerator_type=acc_type, accelerator_count=count, gpu=has_gpu
    )
