"""Reserved capacity in one solve: reservations are filled first across pools whatever their weights,
never beyond their free count, and the usual ladder (spot, on-demand, pools) takes the rest."""

from __future__ import annotations

from dataclasses import replace

from provisioner.api import labels as wk
from provisioner.cloudprovider.types import InstanceType, Offering, Reservation
from provisioner.scheduling.results import Results
from testkit.builders import gpu_pod, instance_type, node_pool, req, run

RESERVED = wk.CAPACITY_TYPE_RESERVED


def h100(*, reservation: Reservation | None = None, zone: str = "zone-a") -> InstanceType:
    it = instance_type(
        "p.h100x8", cpu=192, memory_gib=2048, gpus=8, gpu_name="h100", gpu_memory_mib=81920, price=55.0
    )
    if reservation is None:
        return it
    reserved = Offering(zone, RESERVED, 0.0, reservation.free > 0, reservation=reservation)
    return it.with_offerings((reserved, *it.offerings))


def capacity_types(results: Results, pool: str) -> list[str]:
    return sorted(c.offering.capacity_type for c in results.new_claims if c.nodepool.name == pool)


def test_a_reservation_in_a_lighter_pool_is_filled_before_a_heavier_pool_buys_on_demand() -> None:
    block = Reservation("cr-1", free=2, total=2)
    heavy = node_pool("on-demand", weight=100)
    light = node_pool("reserved", weight=1)

    results = run(
        [gpu_pod(f"train-{i}") for i in range(3)],
        [heavy, light],
        {"on-demand": [h100()], "reserved": [h100(reservation=block)]},
    )

    assert capacity_types(results, "reserved") == [RESERVED, RESERVED]
    assert capacity_types(results, "on-demand") == [wk.CAPACITY_TYPE_ON_DEMAND]
    assert [c.offering.reservation.id for c in results.new_claims if c.offering.reservation] == ["cr-1"] * 2


def test_when_the_reservation_is_used_up_the_rest_falls_to_spot_in_the_same_pool_and_solve() -> None:
    block = Reservation("cr-1", free=1, total=4)
    it = h100(reservation=block)
    spot = Offering("zone-b", wk.CAPACITY_TYPE_SPOT, 20.0)
    pool = node_pool("h100", requirements=[req(wk.CAPACITY_TYPE, "In", RESERVED, "spot", "on-demand")])

    results = run([gpu_pod(f"train-{i}") for i in range(3)], pool, [it.with_offerings((*it.offerings, spot))])

    assert sorted(c.offering.capacity_type for c in results.new_claims) == [RESERVED, "spot", "spot"]
    assert not results.unschedulable


def test_a_full_reservation_is_no_option_and_a_pool_refusing_reserved_never_uses_one() -> None:
    full = Reservation("cr-full", free=0, total=2)
    free = Reservation("cr-free", free=2, total=2)
    no_reserved = node_pool("od", weight=5, requirements=[req(wk.CAPACITY_TYPE, "In", "on-demand")])

    results = run(
        [gpu_pod("a"), gpu_pod("b")],
        [no_reserved, node_pool("full", weight=1)],
        {"od": [h100(reservation=free)], "full": [h100(reservation=full)]},
    )

    assert capacity_types(results, "od") == ["on-demand", "on-demand"]
    assert capacity_types(results, "full") == []


def test_two_pools_sharing_one_reservation_take_no_more_than_its_free_count() -> None:
    block = Reservation("cr-1", free=1, total=1)
    it = h100(reservation=block)

    results = run(
        [gpu_pod("a"), gpu_pod("b")],
        [node_pool("one", weight=2), node_pool("two", weight=1)],
        {"one": [it], "two": [replace(it)]},
    )

    reserved = [c for c in results.new_claims if c.offering.capacity_type == RESERVED]
    assert len(reserved) == 1 and len(results.new_claims) == 2
