"""NVIDIA MIG: the GPU-instance profiles each MIG-capable GPU model holds, and the layouts the GPU
operator's MIG manager applies by name (the node label `nvidia.com/mig.config`).

Owns the profile tables and what a layout turns a node's whole GPUs into under the device plugin's mixed
strategy (`nvidia.com/mig-<profile>` resources). The H100 80GB and H200 tables were read from real
hardware with `nvidia-smi mig -lgip` (../shared/data/mig-profiles.yaml); the A100 40GB and 80GB tables are
the ones NVIDIA's MIG user guide publishes. Layout names are the MIG manager's default configuration's
(`all-disabled`, `all-enabled`, `all-<profile>`, `all-balanced`). Which resources count as accelerators
is `accelerators`'. Pure data and arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
"""Node label the MIG manager reads: the layout to apply (`all-1g.10gb`, `all-balanced`...)."""
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
"""Node label the MIG manager writes: `pending`, `rebooting`, `success` or `failed`."""
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
WHOLE_GPU = "nvidia.com/gpu"
COMPUTE_SLICES = 7
"""Compute slices of every MIG-capable GPU here: a `<n>g.<m>gb` profile uses n of the 7."""

DISABLED = "all-disabled"
ENABLED = "all-enabled"
BALANCED = "all-balanced"


@dataclass(frozen=True, slots=True)
class Profile:
    """One GPU-instance profile of one GPU model."""

    name: str
    """`1g.10gb`; the resource is `nvidia.com/mig-1g.10gb`."""
    count: int
    """How many one GPU holds when it is the only profile in use."""
    memory_gib: float
    """Memory of one instance."""

    @property
    def resource(self) -> str:
        return MIG_RESOURCE_PREFIX + self.name

    @property
    def compute(self) -> int:
        """Compute slices (of 7) one instance takes: the `1` of `1g.10gb`."""
        return int(self.name.split("g.", 1)[0])


def _profiles(*rows: tuple[str, int, float]) -> tuple[Profile, ...]:
    return tuple(Profile(name, count, memory) for name, count, memory in rows)


GPU_MODELS: dict[str, tuple[Profile, ...]] = {
    "a100-40gb": _profiles(
        ("1g.5gb", 7, 4.75),
        ("1g.10gb", 4, 9.62),
        ("2g.10gb", 3, 9.62),
        ("3g.20gb", 2, 19.62),
        ("4g.20gb", 1, 19.62),
        ("7g.40gb", 1, 39.25),
    ),
    "a100-80gb": _profiles(
        ("1g.10gb", 7, 9.50),
        ("1g.20gb", 4, 19.50),
        ("2g.20gb", 3, 19.50),
        ("3g.40gb", 2, 39.25),
        ("4g.40gb", 1, 39.25),
        ("7g.80gb", 1, 79.25),
    ),
    "h100-80gb": _profiles(
        ("1g.10gb", 7, 9.75),
        ("1g.20gb", 4, 19.62),
        ("2g.20gb", 3, 19.62),
        ("3g.40gb", 2, 39.50),
        ("4g.40gb", 1, 39.50),
        ("7g.80gb", 1, 79.25),
    ),
    "h200-141gb": _profiles(
        ("1g.18gb", 7, 16.00),
        ("1g.35gb", 4, 32.50),
        ("2g.35gb", 3, 32.50),
        ("3g.71gb", 2, 69.75),
        ("4g.71gb", 1, 69.75),
        ("7g.141gb", 1, 140.00),
    ),
}
"""MIG-capable GPU model -> its profiles (the `+me` media-engine variants are left out: one per GPU)."""

_BALANCED: dict[str, dict[str, int]] = {
    "a100-40gb": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    "a100-80gb": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "h100-80gb": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "h200-141gb": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
}


def model_of(gpu_name: str, memory_mib: int) -> str | None:
    """The MIG table of a GPU as the catalogs label it (`h100`, 81920 MiB -> `h100-80gb`), or None when
    the model has no MIG (L4, T4, A10G...)."""
    if gpu_name == "a100":
        return "a100-40gb" if 0 < memory_mib < 60 * 1024 else "a100-80gb"
    if gpu_name == "h100":
        return "h100-80gb"
    if gpu_name == "h200":
        return "h200-141gb"
    return None


def layouts(model: str) -> dict[str, dict[str, int]]:
    """Layout name -> profile -> instances per GPU, for one model's MIG manager configuration."""
    out: dict[str, dict[str, int]] = {DISABLED: {}, ENABLED: {}}
    for p in GPU_MODELS[model]:
        out[f"all-{p.name}"] = {p.name: p.count}
    out[BALANCED] = dict(_BALANCED[model])
    return out


def layout_resources(
    *,
    gpu_name: str,
    memory_mib: int,
    gpu_count: int,
    layout: str,
) -> dict[str, int] | str:
    """What a node of `gpu_count` such GPUs advertises once the MIG manager applied `layout` (mixed
    strategy): `{"nvidia.com/mig-1g.10gb": 56}` for 8 x H100 in `all-1g.10gb`; `all-disabled` keeps
    whole GPUs. A str says why the layout cannot apply (no MIG on that GPU, unknown layout name)."""
    if layout == DISABLED:
        return {WHOLE_GPU: gpu_count}
    model = model_of(gpu_name, memory_mib)
    if model is None:
        with_mig = ", ".join(sorted({m.split("-", 1)[0] for m in GPU_MODELS}))
        return f"{gpu_name or 'this type'} GPUs have no MIG (MIG-capable: {with_mig})"
    known = layouts(model)
    per_gpu = known.get(layout)
    if per_gpu is None:
        return f"{MIG_CONFIG_LABEL}={layout} is not a layout of {model}; use one of {', '.join(known)}"
    return {MIG_RESOURCE_PREFIX + name: n * gpu_count for name, n in per_gpu.items()}


def profile(model: str, name: str) -> Profile | None:
    """A profile of a model by name (`1g.10gb`), or None."""
    return next((p for p in GPU_MODELS.get(model, ()) if p.name == name), None)


def profile_name(resource: str) -> str | None:
    """`nvidia.com/mig-1g.10gb` -> `1g.10gb`; None for any other resource."""
    if not resource.startswith(MIG_RESOURCE_PREFIX):
        return None
    return resource[len(MIG_RESOURCE_PREFIX) :] or None


def compute_slices(resource: str) -> int:
    """Compute slices (of 7) one unit of a MIG resource takes (`mig-3g.40gb` -> 3); 0 if not MIG."""
    name = profile_name(resource)
    head = name.split("g.", 1)[0] if name and "g." in name else ""
    return int(head) if head.isdigit() else 0


def holders(resource: str) -> list[str]:
    """The `model/layout` pairs whose nodes advertise a MIG resource, for reasons that say where a
    pod asking for it could go (`h100-80gb/all-1g.10gb`, ...)."""
    name = profile_name(resource)
    out = []
    for model in GPU_MODELS:
        for layout, per_gpu in layouts(model).items():
            if name in per_gpu:
                out.append(f"{model}/{layout}")
    return out


def layout_of(labels: Mapping[str, str]) -> str | None:
    """The layout a node's (or pool template's) labels ask the MIG manager for, None when none."""
    value = labels.get(MIG_CONFIG_LABEL)
    return value or None
