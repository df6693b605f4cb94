"""What the Compute stand-in serves by default: one project, the zones of us-central1 (plus one zone of
another region, which the provider must ignore), machine types with their built-in accelerators, and the
attachable accelerator types per zone. Shapes follow the public machine-type documentation; the zone
placement is fixture data chosen so fallbacks across zones can be tested."""

from __future__ import annotations

from dataclasses import dataclass, field

PROJECT = "test-project"
REGION = "us-central1"
ZONES = ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"]
OTHER_REGION_ZONE = "europe-west4-a"


@dataclass(frozen=True)
class MachineSpec:
    """One machine type and the zones that offer it."""

    name: str
    cpus: int
    memory_mb: int
    zones: tuple[str, ...]
    accelerators: tuple[tuple[str, int], ...] = ()
    shared_cpu: bool = False
    architecture: str = "X86_64"


@dataclass(frozen=True)
class AcceleratorSpec:
    """An accelerator type a zone offers (attachable ones go on n1 through guestAccelerators)."""

    name: str
    description: str
    max_cards: int
    zones: tuple[str, ...]


ALL = (*ZONES, OTHER_REGION_ZONE)
ABC = ("us-central1-a", "us-central1-b", "us-central1-c")

MACHINES: list[MachineSpec] = [
    MachineSpec("e2-medium", 2, 4096, ALL, shared_cpu=True),
    MachineSpec("e2-standard-2", 2, 8192, ALL),
    MachineSpec("e2-standard-4", 4, 16384, ALL),
    MachineSpec("n2-standard-8", 8, 32768, ALL),
    MachineSpec("n1-standard-4", 4, 15360, ALL),
    MachineSpec("n1-standard-8", 8, 30720, ALL),
    MachineSpec("n1-standard-16", 16, 61440, ALL),
    MachineSpec("t2a-standard-4", 4, 16384, ("us-central1-a", "us-central1-b"), architecture="ARM64"),
    MachineSpec("g2-standard-8", 8, 32768, ABC, accelerators=(("nvidia-l4", 1),)),
    MachineSpec("g2-standard-24", 24, 98304, ABC, accelerators=(("nvidia-l4", 2),)),
    MachineSpec("a2-highgpu-1g", 12, 87040, ALL, accelerators=(("nvidia-tesla-a100", 1),)),
    MachineSpec("a2-highgpu-8g", 96, 696320, ALL, accelerators=(("nvidia-tesla-a100", 8),)),
    MachineSpec("a2-ultragpu-8g", 96, 1392640, ABC, accelerators=(("nvidia-a100-80gb", 8),)),
    MachineSpec("a3-highgpu-8g", 208, 1916928, ABC, accelerators=(("nvidia-h100-80gb", 8),)),
    MachineSpec("a3-megagpu-8g", 208, 1916928, ABC, accelerators=(("nvidia-h100-mega-80gb", 8),)),
    MachineSpec("a3-ultragpu-8g", 224, 3022848, ABC, accelerators=(("nvidia-h200-141gb", 8),)),
    MachineSpec("a4-highgpu-8g", 224, 4063232, ("us-central1-b",), accelerators=(("nvidia-b200", 8),)),
    MachineSpec("a2-megagpu-16g", 96, 1392640, ALL, accelerators=(("nvidia-tesla-a100", 16),)),
]

ACCELERATORS: list[AcceleratorSpec] = [
    AcceleratorSpec("nvidia-tesla-t4", "NVIDIA T4", 4, ("us-central1-a", "us-central1-b", "us-central1-f")),
    AcceleratorSpec("nvidia-tesla-v100", "NVIDIA V100", 8, ("us-central1-a", "us-central1-b")),
    AcceleratorSpec("nvidia-l4", "NVIDIA L4", 8, ABC),
    AcceleratorSpec("nvidia-tesla-a100", "NVIDIA A100 40GB", 16, ALL),
    AcceleratorSpec("nvidia-a100-80gb", "NVIDIA A100 80GB", 8, ABC),
    AcceleratorSpec("nvidia-h100-80gb", "NVIDIA H100 80GB", 8, ABC),
    AcceleratorSpec("nvidia-h100-mega-80gb", "NVIDIA H100 80GB MEGA", 8, ABC),
    AcceleratorSpec("nvidia-h200-141gb", "NVIDIA H200 141GB", 8, ABC),
    AcceleratorSpec("nvidia-b200", "NVIDIA B200", 8, ("us-central1-b",)),
]


@dataclass
class Catalog:
    """The stand-in's static view of the cloud (tests may pass their own)."""

    project: str = PROJECT
    zones: dict[str, str] = field(
        default_factory=lambda: {**{z: REGION for z in ZONES}, OTHER_REGION_ZONE: "europe-west4"}
    )
    machines: list[MachineSpec] = field(default_factory=lambda: list(MACHINES))
    accelerators: list[AcceleratorSpec] = field(default_factory=lambda: list(ACCELERATORS))
