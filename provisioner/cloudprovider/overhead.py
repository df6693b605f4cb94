"""What a node keeps for itself: kube-reserved, system-reserved and the eviction threshold, per shape.

Pure arithmetic on an instance's shape; catalogs and providers call it to fill `InstanceType.overhead`, so
the scheduler packs pods against what the kubelet will really report as allocatable.

Two formulas, both published by the clouds and both keyed on the shape only:
- `eks` (Karpenter's and the EKS AMIs'): CPU 6% of the first core, 1% of the second, 0.5% of the third
  and fourth, 0.25% of every core above four; memory 11 MiB per pod the node may run plus 255 MiB.
- `gke` (GKE's node allocatable): the same CPU tiers; memory 25% of the first 4 GiB, 20% of the next
  4 GiB, 10% of the next 8 GiB, 6% of the next 112 GiB and 2% above 128 GiB (255 MiB below 1 GiB).
Both add the kubelet's hard eviction threshold (`memory.available<100Mi`, `nodefs.available<10%`) and a
1 GiB ephemeral-storage kube reservation. System-reserved is empty by default, as in Karpenter; pass it
when the node image reserves some.
"""

from __future__ import annotations

from collections.abc import Mapping

from provisioner.api.quantities import CPU, EPHEMERAL_STORAGE, MEMORY, ResourceList

MIB = 2**20
GIB = 2**30

EVICTION_HARD_MEMORY = 100 * MIB
"""`memory.available<100Mi`, the kubelet default."""
EVICTION_HARD_NODEFS_PERCENT = 10
"""`nodefs.available<10%`, the kubelet default."""
KUBE_RESERVED_EPHEMERAL_STORAGE = 1 * GIB

# (cores in this tier, tenths of a per mille of each core reserved: 6%, 1%, 0.5%, 0.25%); None is
# "every core above four". Tenths keep 0.25% of a core (2.5 millicores) an integer.
_CPU_TIERS_TENTHS: tuple[tuple[int | None, int], ...] = ((1, 600), (1, 100), (2, 50), (None, 25))

# GKE memory tiers: (GiB in this tier, percent reserved); None is "everything above".
_GKE_MEMORY_TIERS: tuple[tuple[int | None, int], ...] = ((4, 25), (4, 20), (8, 10), (112, 6), (None, 2))


def kube_reserved_cpu(vcpu: int) -> int:
    """Millicores kube-reserved for a machine of `vcpu` cores (6% / 1% / 0.5% / 0.25% tiers)."""
    # Work in ten-thousandths of a core so 0.25% of a core (2.5m) stays exact until the final rounding.
    remaining = vcpu
    total = 0  # 1/10000 of a core, i.e. tenths of a millicore
    for cores, tenths_per_mille in _CPU_TIERS_TENTHS:
        take = remaining if cores is None else min(remaining, cores)
        total += take * tenths_per_mille
        remaining -= take
        if remaining <= 0:
            break
    return -(-total // 10)  # round up: never promise a fraction of a millicore we do not have


def kube_reserved_memory_eks(max_pods: int) -> int:
    """Bytes kube-reserved by the EKS formula: 11 MiB per pod plus 255 MiB."""
    return (11 * max_pods + 255) * MIB


def kube_reserved_memory_gke(memory_mib: int) -> int:
    """Bytes kube-reserved by GKE's tiers."""
    if memory_mib < 1024:
        return 255 * MIB
    remaining = memory_mib * MIB
    total = 0
    for gib, percent in _GKE_MEMORY_TIERS:
        take = remaining if gib is None else min(remaining, gib * GIB)
        total += take * percent // 100
        remaining -= take
        if remaining <= 0:
            break
    return total


def overhead(
    *,
    vcpu: int,
    memory_mib: int,
    max_pods: int,
    ephemeral_storage: int | None = None,
    formula: str = "eks",
    system_reserved: Mapping[str, int] | None = None,
) -> ResourceList:
    """kube-reserved + system-reserved + hard eviction thresholds for one shape, in base units.

    `ephemeral_storage` is the node's root volume in bytes (left out of the result when None).
    `formula` is `eks` or `gke` (see the module docstring).
    """
    if formula == "eks":
        memory = kube_reserved_memory_eks(max_pods)
    elif formula == "gke":
        memory = kube_reserved_memory_gke(memory_mib)
    else:
        raise ValueError(f"unknown overhead formula {formula!r}: use 'eks' or 'gke'")
    out: ResourceList = {
        CPU: kube_reserved_cpu(vcpu),
        MEMORY: memory + EVICTION_HARD_MEMORY,
    }
    if ephemeral_storage is not None:
        out[EPHEMERAL_STORAGE] = (
            KUBE_RESERVED_EPHEMERAL_STORAGE + ephemeral_storage * EVICTION_HARD_NODEFS_PERCENT // 100
        )
    for name, amount in (system_reserved or {}).items():
        out[name] = out.get(name, 0) + amount
    return out
