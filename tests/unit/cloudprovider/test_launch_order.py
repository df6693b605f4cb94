"""The one launch order every provider follows: reserved first, then the cheapest of spot and on-demand,
as the claim's requirements allow, unavailable offerings skipped and named, ties resolved the same way
every time."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.api import labels as wk
from provisioner.api.nodeclaim import NodeClaim
from provisioner.cloudprovider import InstanceType, Offering, OfferingKey
from provisioner.cloudprovider.launch_order import LaunchOrder, launch_order, options_of
from testkit.builders import node_claim

SPOT, OD, RESERVED = wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND, wk.CAPACITY_TYPE_RESERVED


def itype(
    name: str, prices: dict[tuple[str, str], float], *, unavailable: frozenset[tuple[str, str]] = frozenset()
) -> InstanceType:
    return InstanceType(
        name=name,
        capacity={"cpu": 2000},
        offerings=tuple(
            Offering(zone=z, capacity_type=ct, price=p, available=(z, ct) not in unavailable)
            for (z, ct), p in prices.items()
        ),
    )


def claim(
    options: list[str] | None = None,
    *,
    capacity_types: list[str] | None = None,
    zones: list[str] | None = None,
    not_zones: list[str] | None = None,
) -> NodeClaim:
    return node_claim(
        "c", options, capacity_types=capacity_types, zones=zones, not_zones=not_zones, nodepool=None
    )


def keys(order: LaunchOrder) -> list[tuple[str, str, str]]:
    return [(a.instance_type.name, a.zone, a.capacity_type) for a in order.attempts]


SMALL = itype("small", {("a", SPOT): 0.03, ("b", SPOT): 0.02, ("a", OD): 0.10, ("b", OD): 0.10})
LARGE = itype("large", {("a", SPOT): 0.15, ("b", SPOT): 0.16, ("a", OD): 0.20, ("b", OD): 0.20})


def test_spot_goes_first_while_cheaper_and_never_before_a_cheaper_on_demand_offering() -> None:
    order = launch_order(claim(["small", "large"], capacity_types=[SPOT, OD]), [SMALL, LARGE])

    # Every zone's spot of the small type first; the large type's spot (0.15) only after the small
    # type's on-demand (0.10), which costs less.
    assert keys(order) == [
        ("small", "b", SPOT),
        ("small", "a", SPOT),
        ("small", "a", OD),
        ("small", "b", OD),
        ("large", "a", SPOT),
        ("large", "b", SPOT),
        ("large", "a", OD),
        ("large", "b", OD),
    ]
    assert [(ct, len(run)) for ct, run in order.phases()] == [(SPOT, 2), (OD, 2), (SPOT, 2), (OD, 2)]


def test_on_demand_goes_first_when_it_is_cheaper_than_every_spot_offering() -> None:
    t = itype("m", {("a", SPOT): 0.30, ("a", OD): 0.10, ("b", SPOT): 0.25})

    order = launch_order(claim(["m"], capacity_types=[SPOT, OD]), [t])

    assert keys(order) == [("m", "a", OD), ("m", "b", SPOT), ("m", "a", SPOT)]


def test_reserved_goes_first_even_when_dearer() -> None:
    t = itype("p5", {("a", SPOT): 10.0, ("a", OD): 50.0, ("b", RESERVED): 60.0})

    order = launch_order(claim(["p5"], capacity_types=[RESERVED, SPOT, OD]), [t])

    assert [ct for ct, _ in order.phases()] == [RESERVED, SPOT, OD]


def test_a_claim_silent_on_capacity_type_admits_every_capacity_type() -> None:
    t = itype("m", {("a", SPOT): 0.03, ("a", OD): 0.10, ("a", RESERVED): 0.5})

    order = launch_order(claim(["m"]), [t])

    assert keys(order) == [("m", "a", RESERVED), ("m", "a", SPOT), ("m", "a", OD)]


@pytest.mark.parametrize(
    ("requirements", "expected"),
    [
        ({"capacity_types": [OD]}, {("a", OD), ("b", OD)}),
        ({"capacity_types": [SPOT], "zones": ["b"]}, {("b", SPOT)}),
        ({"capacity_types": [SPOT, OD], "not_zones": ["a"]}, {("b", SPOT), ("b", OD)}),
        ({"capacity_types": [SPOT], "zones": ["c"]}, set()),
    ],
    ids=["on-demand-only", "spot-in-b", "not-in-a", "zone-without-offering"],
)
def test_the_claim_requirements_decide_which_offerings_are_tried(
    requirements: dict[str, list[str]], expected: set[tuple[str, str]]
) -> None:
    order = launch_order(claim(["small"], **requirements), [SMALL])

    assert {(a.zone, a.capacity_type) for a in order.attempts} == expected


def test_the_provider_narrows_zones_and_capacity_types_to_what_it_can_launch() -> None:
    t = itype("m", {("a", SPOT): 0.03, ("b", SPOT): 0.03, ("a", RESERVED): 0.0, ("b", OD): 0.1})

    order = launch_order(claim(["m"]), [t], zones={"b"}, capacity_types={SPOT, OD})

    assert keys(order) == [("m", "b", SPOT), ("m", "b", OD)]


def test_unavailable_offerings_are_skipped_and_named() -> None:
    t = itype("m", {("a", OD): 0.1, ("b", OD): 0.1, ("c", OD): 0.1}, unavailable=frozenset({("a", OD)}))

    order = launch_order(claim(["m"], capacity_types=[OD]), [t], unavailable={OfferingKey("m", "c", OD)})

    assert keys(order) == [("m", "b", OD)]
    assert order.unavailable == (OfferingKey("m", "a", OD), OfferingKey("m", "c", OD))


def test_unavailable_offerings_the_claim_does_not_allow_are_not_named() -> None:
    t = itype("m", {("a", OD): 0.1, ("a", SPOT): 0.05}, unavailable=frozenset({("a", SPOT)}))

    order = launch_order(claim(["m"], capacity_types=[OD]), [t])

    assert order.unavailable == ()


def test_equal_prices_follow_the_claim_option_order_then_the_zone_then_on_demand() -> None:
    first = itype("first", {("b", SPOT): 0.1, ("b", OD): 0.1, ("a", SPOT): 0.1})
    second = itype("second", {("a", OD): 0.1})

    order = launch_order(claim(["first", "second"], capacity_types=[SPOT, OD]), [second, first])

    assert keys(order) == [
        ("first", "a", SPOT),
        ("first", "b", OD),
        ("first", "b", SPOT),
        ("second", "a", OD),
    ]


def test_only_the_claim_options_are_tried_and_every_type_when_it_names_none() -> None:
    other = itype("other", {("a", OD): 0.01})

    assert options_of(claim(["large", "small"]), [SMALL, other, LARGE]) == [LARGE, SMALL]
    assert options_of(claim(), [SMALL, other, LARGE]) == [SMALL, other, LARGE]
    order = launch_order(claim(["small"]), [SMALL, other])
    assert {a.instance_type.name for a in order.attempts} == {"small"}


ZONES = ["a", "b", "c"]
offering_sets = st.dictionaries(
    st.tuples(st.sampled_from(ZONES), st.sampled_from([SPOT, OD, RESERVED])),
    st.sampled_from([0.01, 0.05, 0.1, 0.5, 1.0]),
    min_size=1,
)


@given(st.lists(offering_sets, min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_the_order_starts_at_the_cheapest_offering_and_ignores_the_input_order(
    price_sets: list[dict[tuple[str, str], float]], rng: random.Random
) -> None:
    types = [itype(f"t{i}", prices) for i, prices in enumerate(price_sets)]
    c = claim([t.name for t in types])

    order = launch_order(c, types)
    shuffled = [t.with_offerings(tuple(rng.sample(t.offerings, len(t.offerings)))) for t in types]
    rng.shuffle(shuffled)

    assert keys(launch_order(c, shuffled)) == keys(order)
    assert len(order.attempts) == sum(len(t.offerings) for t in types)
    first = order.attempts[0]
    if first.capacity_type != RESERVED:
        assert first.price == min(o.price for t in types for o in t.offerings)
    prices = [a.price for a in order.attempts if a.capacity_type != RESERVED]
    assert prices == sorted(prices)
    phases = [ct for ct, _ in order.phases()]
    assert RESERVED not in phases[1:]
