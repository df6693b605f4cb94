"""The CloudProvider contract, run against every provider through its harness (fake, AWS on moto, GCP
on the Compute stand-in). What a controller may rely on whichever cloud it talks to."""

from __future__ import annotations

import pytest

from provisioner.api import labels as wk
from provisioner.cloudprovider import (
    InstanceType,
    InsufficientCapacity,
    NotFound,
    OfferingKey,
    TransientError,
)
from provisioner.cloudprovider.wrappers import RetryingProvider
from testkit.builders import node_claim
from testkit.providers.harness import Harness

SPOT = wk.CAPACITY_TYPE_SPOT
ON_DEMAND = wk.CAPACITY_TYPE_ON_DEMAND


def options(harness: Harness, names: list[str]) -> list[InstanceType]:
    """The provider's instance types for these names, in the given order (the claim's ranking)."""
    by_name = {t.name: t for t in harness.provider.instance_types(harness.node_class)}
    missing = [n for n in names if n not in by_name]
    assert not missing, f"{harness.name} offers no {missing}"
    return [by_name[n] for n in names]


def test_create_get_list_delete_round_trip(harness: Harness) -> None:
    cheapest = harness.small_types[0]
    claim = node_claim("round-trip", [cheapest], node_class=harness.node_class)

    instance = harness.provider.create(claim, options(harness, [cheapest]), harness.node_class)

    assert instance.instance_type == cheapest
    assert instance.capacity_type == ON_DEMAND
    assert instance.zone in harness.zones
    assert instance.nodeclaim == "round-trip"
    assert instance.price > 0
    assert harness.provider.get(instance.provider_id).provider_id == instance.provider_id
    assert instance.provider_id in [i.provider_id for i in harness.provider.list()]

    harness.provider.delete(instance.provider_id)

    assert instance.provider_id not in [i.provider_id for i in harness.provider.list()]
    with pytest.raises(NotFound):
        harness.provider.get(instance.provider_id)
    with pytest.raises(NotFound):
        harness.provider.delete(instance.provider_id)


def test_create_launches_the_cheapest_of_the_options(harness: Harness) -> None:
    names = list(reversed(harness.small_types[:2]))  # the dearer one first: price decides, not order
    claim = node_claim("cheapest", names, node_class=harness.node_class)

    instance = harness.provider.create(claim, options(harness, names), harness.node_class)

    assert instance.instance_type == harness.small_types[0]


def test_create_is_idempotent_by_claim_name(harness: Harness) -> None:
    claim = node_claim("idempotent", harness.small_types[:1], node_class=harness.node_class)
    types = options(harness, harness.small_types[:1])
    before = harness.launches()

    first = harness.provider.create(claim, types, harness.node_class)
    second = harness.provider.create(claim, types, harness.node_class)

    assert second.provider_id == first.provider_id
    assert harness.launches() == before + 1
    assert [i.provider_id for i in harness.provider.list() if i.nodeclaim == "idempotent"] == [
        first.provider_id
    ]


def test_spot_stockout_in_one_zone_falls_to_another_zone(harness: Harness) -> None:
    cheapest = harness.small_types[0]
    first, second = harness.zones[:2]
    harness.stockout(instance_type=cheapest, zone=first, capacity_type=SPOT)
    claim = node_claim(
        "spot-zone-fallback",
        [cheapest],
        node_class=harness.node_class,
        capacity_types=(SPOT,),
        zones=(first, second),
    )

    instance = harness.provider.create(claim, options(harness, [cheapest]), harness.node_class)

    assert (instance.zone, instance.capacity_type) == (second, SPOT)


def test_spot_falls_back_to_on_demand_when_spot_is_exhausted_within_one_create(harness: Harness) -> None:
    cheapest = harness.small_types[0]
    zones = tuple(harness.zones[:2])
    for zone in zones:
        harness.stockout(instance_type=cheapest, zone=zone, capacity_type=SPOT)
    claim = node_claim(
        "spot-to-on-demand",
        [cheapest],
        node_class=harness.node_class,
        capacity_types=(SPOT, ON_DEMAND),
        zones=zones,
    )
    before = harness.launches()

    instance = harness.provider.create(claim, options(harness, [cheapest]), harness.node_class)

    assert instance.capacity_type == ON_DEMAND
    assert instance.zone in zones
    assert harness.launches() == before + 1


def test_spot_stockout_falls_to_cheaper_on_demand_before_a_dearer_spot_type(harness: Harness) -> None:
    # The shared launch order: never a dearer spot offering before a cheaper on-demand one. (The AWS and
    # fake providers used to try every spot offering first, so an 8 x H100 spot instance came before a
    # small on-demand one.)
    small, gpu8 = harness.small_types[0], harness.gpu8_h100_type
    zones = tuple(harness.zones[:2])
    for zone in zones:
        harness.stockout(instance_type=small, zone=zone, capacity_type=SPOT)
    claim = node_claim(
        "no-dear-spot",
        [small, gpu8],
        node_class=harness.node_class,
        capacity_types=(SPOT, ON_DEMAND),
        zones=zones,
    )

    instance = harness.provider.create(claim, options(harness, [small, gpu8]), harness.node_class)

    assert (instance.instance_type, instance.capacity_type) == (small, ON_DEMAND)


def test_stockout_of_the_first_option_launches_the_next_option(harness: Harness) -> None:
    first, second = harness.small_types[:2]
    for zone in harness.zones:
        harness.stockout(instance_type=first, zone=zone, capacity_type=ON_DEMAND)
    claim = node_claim("next-option", [first, second], node_class=harness.node_class)

    instance = harness.provider.create(claim, options(harness, [first, second]), harness.node_class)

    assert instance.instance_type == second


def test_stockout_of_every_offering_raises_insufficient_capacity_naming_them(harness: Harness) -> None:
    cheapest = harness.small_types[0]
    zone = harness.zones[0]
    harness.stockout(instance_type=cheapest, zone=zone, capacity_type=ON_DEMAND)
    claim = node_claim("stocked-out", [cheapest], node_class=harness.node_class, zones=(zone,))
    before = harness.launches()

    with pytest.raises(InsufficientCapacity) as caught:
        harness.provider.create(claim, options(harness, [cheapest]), harness.node_class)

    assert OfferingKey(cheapest, zone, ON_DEMAND) in caught.value.offerings
    assert str(OfferingKey(cheapest, zone, ON_DEMAND)) in str(caught.value)
    assert harness.launches() == before
    assert not [i for i in harness.provider.list() if i.nodeclaim == "stocked-out"]


def test_throttling_surfaces_as_a_transient_error(harness: Harness) -> None:
    # Retries belong to the RetryingProvider (DESIGN.md): the provider itself must not absorb throttling.
    claim = node_claim("throttled-once", harness.small_types[:1], node_class=harness.node_class)
    types = options(harness, harness.small_types[:1])
    harness.throttle(times=1)

    with pytest.raises(TransientError):
        harness.provider.create(claim, types, harness.node_class)
    instance = harness.provider.create(claim, types, harness.node_class)

    assert instance.instance_type == harness.small_types[0]


def test_throttling_is_retried_by_the_retry_wrapper_and_then_succeeds(harness: Harness) -> None:
    sleeps: list[float] = []
    provider = RetryingProvider(harness.provider, attempts=5, initial=0.01, maximum=0.05, sleep=sleeps.append)
    claim = node_claim("throttled-twice", harness.small_types[:1], node_class=harness.node_class)
    types = options(harness, harness.small_types[:1])
    before = harness.launches()
    harness.throttle(times=2)

    instance = provider.create(claim, types, harness.node_class)

    assert instance.instance_type == harness.small_types[0]
    assert len(sleeps) == 2
    assert all(0 < s <= 0.05 for s in sleeps)
    assert harness.launches() == before + 1


def test_instance_types_carry_gpu_details(harness: Harness) -> None:
    (gpu8,) = options(harness, [harness.gpu8_h100_type])

    assert gpu8.gpu is not None
    assert (gpu8.gpu.name, gpu8.gpu.count) == ("h100", 8)
    assert gpu8.gpu.memory_mib >= 80 * 1024
    assert gpu8.capacity[wk.GPU_RESOURCE] == 8
    assert gpu8.labels[wk.GPU_NAME] == "h100"
    assert gpu8.labels[wk.GPU_COUNT] == "8"
    assert gpu8.allocatable["cpu"] < gpu8.capacity["cpu"]


def test_instance_types_offer_the_small_types_in_every_zone(harness: Harness) -> None:
    for instance_type in options(harness, harness.small_types):
        on_demand_zones = {o.zone for o in instance_type.offerings if o.capacity_type == ON_DEMAND}
        assert set(harness.zones) <= on_demand_zones, instance_type.name
        assert all(o.price > 0 for o in instance_type.offerings), instance_type.name


def test_a_claim_for_8_h100_launches_the_8_h100_type(harness: Harness) -> None:
    claim = node_claim("train-8xh100", [harness.gpu8_h100_type], node_class=harness.node_class)

    instance = harness.provider.create(claim, options(harness, [harness.gpu8_h100_type]), harness.node_class)

    assert instance.instance_type == harness.gpu8_h100_type
    assert instance.capacity_type == ON_DEMAND


def test_a_fresh_instance_is_not_drifted_and_nothing_interrupts_it(harness: Harness) -> None:
    claim = node_claim("fresh", harness.small_types[:1], node_class=harness.node_class)
    instance = harness.provider.create(claim, options(harness, harness.small_types[:1]), harness.node_class)
    claim.status.provider_id = instance.provider_id
    claim.status.instance_type = instance.instance_type
    claim.status.image_id = instance.image_id

    assert harness.provider.is_drifted(claim, harness.node_class) is None
    assert [e for e in harness.provider.interruptions() if e.provider_id == instance.provider_id] == []
