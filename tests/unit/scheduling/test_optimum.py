"""The exact whole-node optimum (`provisioner.scheduling.optimum`, HiGHS): the cheapest real packing,
within each pool's limits, never counting reserved offerings (paid whether used or not)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.cloudprovider.types import Offering, Reservation
from provisioner.scheduling.optimum import exact_optimum
from tests.unit.disruption.builders import instance_type, node_pool, pod

SMALL = instance_type("m.large", cpu=4, memory_gib=16, price=0.2)
BIG = instance_type("m.4xlarge", cpu=16, memory_gib=64, price=0.7)


def test_the_optimum_packs_whole_pods_on_the_cheapest_whole_nodes() -> None:
    # Eight 1.5-CPU pods: two per m.large (4 CPU less overhead), or eight... on two m.4xlarge? One big
    # node holds at most ten of them: 0.7 beats four smalls at 0.8.
    pods = [pod(f"p{i}", cpu="1500m", memory="1Gi") for i in range(8)]
    cost, status = exact_optimum(pods, [node_pool()], [SMALL, BIG], ceiling=10.0, time_limit=30)
    assert status == "optimal"
    assert cost == pytest.approx(0.7)


def test_a_pool_limit_forces_the_dearer_mix() -> None:
    pods = [pod(f"p{i}", cpu="1500m", memory="1Gi") for i in range(6)]
    cheap_big = instance_type("m.4xlarge", cpu=16, memory_gib=64, price=0.5)
    free, _ = exact_optimum(pods, [node_pool()], [SMALL, cheap_big], ceiling=10.0, time_limit=30)
    assert free == pytest.approx(0.5)
    limited = node_pool()
    limited.spec.limits = {"cpu": "12"}  # no 16-CPU node fits under the limit: three smalls
    cost, status = exact_optimum(pods, [limited], [SMALL, cheap_big], ceiling=10.0, time_limit=30)
    assert status == "optimal"
    assert cost == pytest.approx(0.6)
    capped = node_pool()
    capped.spec.limits = {"nodes": "1"}
    cost, status = exact_optimum(pods, [capped], [SMALL], ceiling=10.0, time_limit=30)
    assert cost is None and status != "optimal", "eight pods cannot fit on one small node"


def test_reserved_offerings_are_left_out_and_unplaceable_pods_too() -> None:
    reserved = Offering("zone-a", "reserved", 0.0, reservation=Reservation(id="cr-1", free=5, total=5))
    free = replace(BIG, offerings=(*BIG.offerings, reserved))
    pods = [pod("a", cpu="2", memory="1Gi"), pod("huge", cpu="500", memory="1Gi")]
    cost, status = exact_optimum(
        pods, [node_pool(capacity_types=("on-demand", "reserved"))], [free], ceiling=5.0, time_limit=30
    )
    expected: tuple[object, str] = (pytest.approx(0.7), "optimal")
    assert (cost, status) == expected
