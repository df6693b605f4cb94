"""The CloudProvider contract for group launches (`create_group`, the members of one gang), run against
every provider through its harness: one offering for all, all or nothing, idempotent by claim names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.cloudprovider import GangPlacement, InstanceType, InsufficientCapacity, OfferingKey
from testkit.builders import node_claim
from testkit.providers.harness import Harness

ON_DEMAND = wk.CAPACITY_TYPE_ON_DEMAND


def options(harness: Harness, names: list[str]) -> list[InstanceType]:
    by_name = {t.name: t for t in harness.provider.instance_types(harness.node_class)}
    return [by_name[n] for n in names]


def gang(harness: Harness, prefix: str, size: int, names: list[str], **claim: Any) -> list[NodeClaim]:
    return [node_claim(f"{prefix}-{i}", names, node_class=harness.node_class, **claim) for i in range(size)]


def ours(harness: Harness, prefix: str) -> list[str]:
    return sorted(
        i.nodeclaim or "" for i in harness.provider.list() if (i.nodeclaim or "").startswith(prefix)
    )


def test_a_group_launches_every_member_in_one_offering_in_claim_order(harness: Harness) -> None:
    small = harness.small_types[0]
    first, second = harness.zones[:2]
    harness.stockout(instance_type=small, zone=first, capacity_type=ON_DEMAND)
    claims = gang(harness, "one-zone", 3, [small], zones=(first, second))
    before = harness.launches()

    instances = harness.provider.create_group(
        claims, options(harness, [small]), harness.node_class, placement=GangPlacement(gang="ml/one-zone")
    )

    assert [i.nodeclaim for i in instances] == ["one-zone-0", "one-zone-1", "one-zone-2"]
    assert {(i.instance_type, i.zone, i.capacity_type) for i in instances} == {(small, second, ON_DEMAND)}
    assert harness.launches() == before + 3
    assert ours(harness, "one-zone") == ["one-zone-0", "one-zone-1", "one-zone-2"]


def test_a_group_with_no_offering_left_launches_nothing_and_names_what_it_tried(harness: Harness) -> None:
    small = harness.small_types[0]
    zone = harness.zones[0]
    harness.stockout(instance_type=small, zone=zone, capacity_type=ON_DEMAND)
    before = harness.launches()

    with pytest.raises(InsufficientCapacity) as caught:
        harness.provider.create_group(
            gang(harness, "none", 2, [small], zones=(zone,)), options(harness, [small]), harness.node_class
        )

    assert OfferingKey(small, zone, ON_DEMAND) in caught.value.offerings
    assert harness.launches() == before
    assert ours(harness, "none") == []


def test_a_group_launched_twice_launches_once(harness: Harness) -> None:
    small = harness.small_types[0]
    claims = gang(harness, "twice", 2, [small])
    types = options(harness, [small])

    first = harness.provider.create_group(claims, types, harness.node_class)
    before = harness.launches()
    second = harness.provider.create_group(claims, types, harness.node_class)

    assert [i.provider_id for i in second] == [i.provider_id for i in first]
    assert harness.launches() == before


def test_a_group_too_big_for_the_cheapest_offering_launches_whole_in_the_next(harness: Harness) -> None:
    small = harness.small_types[0]
    first, second = harness.zones[:2]
    harness.set_capacity(instance_type=small, zone=first, capacity_type=ON_DEMAND, count=2)
    before = harness.launches()

    instances = harness.provider.create_group(
        gang(harness, "big", 3, [small], zones=(first, second)), options(harness, [small]), harness.node_class
    )

    assert {i.zone for i in instances} == {second}
    assert harness.launches() == before + 3
    assert OfferingKey(small, first, ON_DEMAND) in instances[0].skipped


def test_a_group_too_big_for_every_offering_launches_nothing(harness: Harness) -> None:
    small = harness.small_types[0]
    zones = harness.zones[:2]
    for zone in zones:
        harness.set_capacity(instance_type=small, zone=zone, capacity_type=ON_DEMAND, count=3)
    before = harness.launches()

    with pytest.raises(InsufficientCapacity) as caught:
        harness.provider.create_group(
            gang(harness, "short", 4, [small], zones=tuple(zones)),
            options(harness, [small]),
            harness.node_class,
        )

    assert {OfferingKey(small, z, ON_DEMAND) for z in zones} <= set(caught.value.offerings)
    assert harness.launches() == before
    assert ours(harness, "short") == []


def test_a_launch_that_ends_partial_is_terminated_before_the_error(harness: Harness) -> None:
    small = harness.small_types[0]
    zone = harness.zones[0]
    harness.break_atomicity()
    harness.set_capacity(instance_type=small, zone=zone, capacity_type=ON_DEMAND, count=2)
    before = harness.launches()

    with pytest.raises(InsufficientCapacity) as caught:
        harness.provider.create_group(
            gang(harness, "partial", 3, [small], zones=(zone,)), options(harness, [small]), harness.node_class
        )

    assert OfferingKey(small, zone, ON_DEMAND) in caught.value.offerings
    assert [i for i in harness.provider.list() if i.zone == zone and i.instance_type == small] == []
    # Whatever was launched on the way is reported, for the ledger to count its cost.
    assert sum(len(p.provider_ids) for p in caught.value.partial) == harness.launches() - before


def test_a_member_added_to_a_running_gang_joins_its_offering(harness: Harness) -> None:
    small, other = harness.small_types[:2]
    zones = tuple(harness.zones[:2])
    types = options(harness, [small, other])
    first = harness.provider.create_group(
        gang(harness, "grow", 2, [small, other], zones=zones), types, harness.node_class
    )
    harness.stockout(instance_type=small, zone=first[0].zone, capacity_type=ON_DEMAND)

    with pytest.raises(InsufficientCapacity):
        # The gang's offering is out: the third member may not go to another type or zone.
        harness.provider.create_group(
            gang(harness, "grow", 3, [small, other], zones=zones), types, harness.node_class
        )
    assert ours(harness, "grow") == ["grow-0", "grow-1"]


def test_a_placement_group_per_gang_holds_the_whole_gang_and_is_collected_once_it_is_gone(
    harness: Harness,
) -> None:
    gpu = harness.gpu8_h100_type
    node_class = harness.placement_node_class
    types = [t for t in harness.provider.instance_types(node_class) if t.name == gpu]
    claims = [node_claim(f"pg-{i}", [gpu], node_class=node_class) for i in range(2)]
    later = datetime.now(UTC) + timedelta(days=1)

    instances = harness.provider.create_group(
        claims, types, node_class, placement=GangPlacement(gang="ml/pg")
    )

    (group,) = {i.placement_group for i in instances}
    assert group
    assert {i.placement_group for i in harness.provider.list() if i.nodeclaim in ("pg-0", "pg-1")} == {group}
    assert harness.provider.collect_placement(older_than=later) == []
    for instance in instances:
        harness.provider.delete(instance.provider_id)
    assert harness.provider.collect_placement(older_than=later) == [group]
    assert harness.provider.collect_placement(older_than=later) == []


def test_a_replaced_member_lands_beside_its_gang_in_its_placement_group(harness: Harness) -> None:
    gpu = harness.gpu8_h100_type
    node_class = harness.placement_node_class
    types = [t for t in harness.provider.instance_types(node_class) if t.name == gpu]
    claims = [node_claim(f"rep-{i}", [gpu], node_class=node_class) for i in range(3)]
    placement = GangPlacement(gang="ml/rep")
    first = harness.provider.create_group(claims, types, node_class, placement=placement)
    harness.provider.delete(first[1].provider_id)  # interrupted
    replacement = [node_claim("rep-1b", [gpu], node_class=node_class)]

    (new,) = [
        i
        for i in harness.provider.create_group(
            [claims[0], claims[2], *replacement], types, node_class, placement=placement
        )
        if i.nodeclaim == "rep-1b"
    ]

    assert (new.instance_type, new.zone, new.capacity_type) == (
        first[0].instance_type,
        first[0].zone,
        first[0].capacity_type,
    )
    assert new.placement_group == first[0].placement_group is not None
