"""Group launches without an atomic call: the group launch order (offerings every member allows, a
reservation only with room for all) and the one-create-per-member fallback that leaves nothing running
when the group ends partial. Over the fake provider (our own seam)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from providers.fake import FakeProvider
from provisioner.api import labels as wk
from provisioner.cloudprovider import InstanceType, InsufficientCapacity, Offering, OfferingKey, Reservation
from provisioner.cloudprovider.group import launch_one_by_one
from provisioner.cloudprovider.launch_order import Attempt, group_launch_order
from testkit.builders import node_claim
from testkit.providers.harness_fake import fake_node_class

SPOT, OD, RESERVED = wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND, wk.CAPACITY_TYPE_RESERVED
NODE_CLASS = fake_node_class()


def keys(attempts: Iterable[Attempt]) -> list[tuple[str, str, str]]:
    return [(a.instance_type.name, a.zone, a.capacity_type) for a in attempts]


def test_a_group_tries_only_what_every_member_allows_and_reservations_with_room_for_all() -> None:
    small_res = Reservation(id="r-small", free=2, total=2)
    big_res = Reservation(id="r-big", free=4, total=4)
    p5 = InstanceType(
        name="p5",
        capacity={"cpu": 2000},
        offerings=(
            Offering("a", RESERVED, 0.0, reservation=small_res),
            Offering("b", RESERVED, 0.0, reservation=big_res),
            Offering("a", OD, 50.0),
            Offering("b", OD, 50.0),
            Offering("c", OD, 49.0),
        ),
    )
    members = [
        node_claim("m-0", ["p5"], capacity_types=[RESERVED, OD], zones=["a", "b", "c"]),
        node_claim("m-1", ["p5"], capacity_types=[RESERVED, OD], zones=["a", "b"]),
        node_claim("m-2", ["p5"], capacity_types=[RESERVED, OD], zones=["a", "b"]),
    ]

    order = group_launch_order(members, [p5])
    pinned = group_launch_order(members, [p5], zone="a")

    assert keys(order.attempts) == [("p5", "b", RESERVED), ("p5", "a", OD), ("p5", "b", OD)]
    assert keys(pinned.attempts) == [("p5", "a", OD)]


def test_one_by_one_terminates_the_members_of_an_offering_that_ran_short_and_moves_on() -> None:
    fake = FakeProvider()
    fake.set_capacity(instance_type="m5.large", zone="us-east-1a", capacity_type=OD, count=2)
    types = [t for t in fake.instance_types(NODE_CLASS) if t.name == "m5.large"]
    members = [node_claim(f"g-{i}", ["m5.large"], zones=["us-east-1a", "us-east-1b"]) for i in range(3)]

    instances = launch_one_by_one(members, types, NODE_CLASS, create=fake.create, delete=fake.delete)

    assert {i.zone for i in instances} == {"us-east-1b"}
    assert [i.nodeclaim for i in instances] == ["g-0", "g-1", "g-2"]
    assert instances[0].skipped == (OfferingKey("m5.large", "us-east-1a", OD),)
    assert fake.launched_total == 5, "two launched in the short zone, then terminated"
    (partial,) = instances[0].partial
    assert (partial.offering, len(partial.provider_ids)) == (OfferingKey("m5.large", "us-east-1a", OD), 2)
    assert sorted(i.zone for i in fake.list()) == ["us-east-1b"] * 3
    assert fake.remaining(instance_type="m5.large", zone="us-east-1a", capacity_type=OD) == 2


def test_one_by_one_leaves_nothing_running_when_no_offering_takes_the_group() -> None:
    fake = FakeProvider()
    fake.set_capacity(instance_type="m5.large", capacity_type=OD, count=2)
    types = [t for t in fake.instance_types(NODE_CLASS) if t.name == "m5.large"]
    members = [node_claim(f"g-{i}", ["m5.large"], zones=["us-east-1a", "us-east-1b"]) for i in range(3)]

    with pytest.raises(InsufficientCapacity) as caught:
        launch_one_by_one(members, types, NODE_CLASS, create=fake.create, delete=fake.delete)

    assert caught.value.offerings == [
        OfferingKey("m5.large", "us-east-1a", OD),
        OfferingKey("m5.large", "us-east-1b", OD),
    ]
    assert fake.list() == []
