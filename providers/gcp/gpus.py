"""Compute Engine accelerator types as the project's GPU values: lowercase model labels, memory per GPU,
and which accelerators attach to n1 machines (with GCE's vCPU limits per count).

Pure data and lookups; the built-in catalog (provisioner.cloudprovider.catalog) prices what this names.
"""

from __future__ import annotations

from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.types import GPU

# accelerator type -> (label name, memory per GPU in MiB). A100 comes in two memory sizes that share the
# label `a100`; the memory label (`provisioner.sh/gpu-memory`) tells them apart.
ACCELERATORS: dict[str, tuple[str, int]] = {
    "nvidia-h100-80gb": ("h100", 81920),
    "nvidia-h100-mega-80gb": ("h100", 81920),
    "nvidia-h200-141gb": ("h200", 144384),
    "nvidia-b200": ("b200", 184320),
    "nvidia-tesla-a100": ("a100", 40960),
    "nvidia-a100-80gb": ("a100", 81920),
    "nvidia-l4": ("l4", 24576),
    "nvidia-l4-vws": ("l4", 24576),
    "nvidia-tesla-t4": ("t4", 16384),
    "nvidia-tesla-t4-vws": ("t4", 16384),
    "nvidia-tesla-v100": ("v100", 16384),
    "nvidia-tesla-p100": ("p100", 16384),
    "nvidia-tesla-p4": ("p4", 8192),
    "nvidia-tesla-k80": ("k80", 12288),
}

# Accelerators Compute Engine attaches to n1 machines through guestAccelerators, with the most vCPUs an
# n1 machine may have for each GPU count (GCE's published limits).
ATTACHABLE: dict[str, dict[int, int]] = {
    "nvidia-tesla-t4": {1: 48, 2: 48, 4: 96},
    "nvidia-tesla-v100": {1: 12, 2: 24, 4: 48, 8: 96},
    "nvidia-tesla-p100": {1: 16, 2: 32, 4: 96},
    "nvidia-tesla-p4": {1: 24, 2: 48, 4: 96},
}
ATTACH_FAMILY = "n1-"


def gpu(accelerator_type: str, count: int) -> GPU:
    """The GPU value of `count` cards of a GCE accelerator type (`nvidia-h100-80gb` -> h100, 81920 MiB)."""
    short = accelerator_type.rsplit("/", 1)[-1]
    name, memory = ACCELERATORS.get(short, (catalog.gpu_label_name(short), 0))
    return GPU(name=name, count=count, memory_mib=memory, manufacturer="nvidia")


def attach_counts(accelerator_type: str, *, vcpu: int, max_cards: int) -> list[int]:
    """The GPU counts of this accelerator an n1 machine of `vcpu` cores may carry (empty if none)."""
    limits = ATTACHABLE.get(accelerator_type, {})
    return [n for n, most in sorted(limits.items()) if n <= max_cards and vcpu <= most]
