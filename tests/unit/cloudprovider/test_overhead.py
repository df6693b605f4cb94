"""Node overhead: the EKS and GKE reservation formulas."""

from __future__ import annotations

import pytest

from provisioner.api.quantities import CPU, EPHEMERAL_STORAGE, MEMORY
from provisioner.cloudprovider import overhead

MIB = 2**20


@pytest.mark.parametrize(
    ("vcpu", "millicores"),
    [(1, 60), (2, 70), (4, 80), (8, 90), (96, 310), (192, 550)],
    ids=lambda v: str(v),
)
def test_kube_reserved_cpu_follows_the_tiers(vcpu: int, millicores: int) -> None:
    assert overhead.kube_reserved_cpu(vcpu) == millicores


def test_eks_memory_is_11_mib_per_pod_plus_255_mib_plus_eviction() -> None:
    got = overhead.overhead(vcpu=2, memory_mib=8192, max_pods=29)
    assert got[MEMORY] == (11 * 29 + 255) * MIB + 100 * MIB
    assert EPHEMERAL_STORAGE not in got


def test_gke_memory_tiers() -> None:
    # 16 GiB: 25% of 4 + 20% of 4 + 10% of 8 = 1 + 0.8 + 0.8 GiB.
    assert overhead.kube_reserved_memory_gke(16 * 1024) == int(2.6 * 2**30)
    assert overhead.kube_reserved_memory_gke(512) == 255 * MIB


def test_ephemeral_storage_reserves_1_gib_plus_ten_percent() -> None:
    got = overhead.overhead(vcpu=4, memory_mib=16384, max_pods=58, ephemeral_storage=20 * 2**30)
    assert got[EPHEMERAL_STORAGE] == 2**30 + 2 * 2**30


def test_system_reserved_adds_on_top() -> None:
    base = overhead.overhead(vcpu=4, memory_mib=16384, max_pods=58)
    more = overhead.overhead(
        vcpu=4, memory_mib=16384, max_pods=58, system_reserved={CPU: 100, MEMORY: 100 * MIB}
    )
    assert more[CPU] == base[CPU] + 100
    assert more[MEMORY] == base[MEMORY] + 100 * MIB


def test_unknown_formula_is_refused() -> None:
    with pytest.raises(ValueError, match="'eks' or 'gke'"):
        overhead.overhead(vcpu=1, memory_mib=1024, max_pods=10, formula="aks")
