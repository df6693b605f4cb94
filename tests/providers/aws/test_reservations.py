"""Capacity reservations and Capacity Blocks on EC2 over real HTTP: the AWSNodeClass's
capacityReservationSelectorTerms read through DescribeCapacityReservations (served by the fault proxy,
which moto lacks), reserved offerings with their free counts and end times, launches aimed at the
reservation, and a full or expired reservation failing over to the next offering without taking the
type's other offerings with it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from providers.aws import AWSProvider
from provisioner.api import labels as wk
from provisioner.cloudprovider import InstanceType, InsufficientCapacity, OfferingKey
from testkit.builders import node_claim
from testkit.providers.aws import world
from testkit.providers.aws.faults import FaultProxy

A, B = "us-east-1a", "us-east-1b"
RESERVED = wk.CAPACITY_TYPE_RESERVED


def reserved_node_class(**term: Any) -> Any:
    return world.node_class(capacityReservationSelectorTerms=[term])


def reserved_offerings(types: list[InstanceType], name: str) -> list[Any]:
    (it,) = [t for t in types if t.name == name]
    return [o for o in it.offerings if o.capacity_type == RESERVED]


def tags_of(ec2: Any, instance_id: str) -> dict[str, str]:
    raw = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return {t["Key"]: t["Value"] for t in raw.get("Tags", [])}


def test_a_reservation_selected_by_id_becomes_a_reserved_offering_with_its_free_count(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    r = proxy.add_reservation(instance_type="p5.48xlarge", zone=A, count=2)
    proxy.add_reservation(instance_type="p5.48xlarge", zone=B, count=4)  # not selected

    (offering,) = reserved_offerings(provider.instance_types(reserved_node_class(id=r.id)), "p5.48xlarge")

    assert (offering.zone, offering.price, offering.available) == (A, 0.0, True)
    assert offering.reservation is not None
    assert (offering.reservation.id, offering.reservation.free, offering.reservation.kind) == (
        r.id,
        2,
        "default",
    )
    assert offering.reservation.hourly_price > 0
    assert "DescribeCapacityReservations" in proxy.actions


def test_reservations_selected_by_tags_and_owner_skip_other_owners_and_a_node_class_without_terms_has_none(
    new_provider: Any, account: world.World, proxy: FaultProxy
) -> None:
    mine = proxy.add_reservation(instance_type="p5.48xlarge", zone=A, count=1, tags={"team": "ml"})
    proxy.add_reservation(instance_type="p5.48xlarge", zone=B, count=1, tags={"team": "ml"}, owner_id="999")
    proxy.add_reservation(instance_type="p5.48xlarge", zone=B, count=1, tags={"team": "web"})
    provider = new_provider()

    selected = reserved_offerings(
        provider.instance_types(reserved_node_class(tags={"team": "ml"}, ownerID="123456789012")),
        "p5.48xlarge",
    )

    assert [o.reservation.id for o in selected] == [mine.id]
    assert reserved_offerings(provider.instance_types(account.node_class), "p5.48xlarge") == []


def test_a_capacity_block_carries_its_end_and_launches_with_the_capacity_block_market_type(
    provider: AWSProvider, account: world.World, proxy: FaultProxy, ec2: Any
) -> None:
    end = datetime(2026, 11, 25, 11, 30, tzinfo=UTC)
    block = proxy.add_reservation(
        instance_type="p5.48xlarge", zone=A, count=1, kind="capacity-block", end=end
    )
    node_class = reserved_node_class(id=block.id)
    types = [t for t in provider.instance_types(node_class) if t.name == "p5.48xlarge"]
    (offering,) = reserved_offerings(types, "p5.48xlarge")
    assert offering.reservation is not None and offering.reservation.ends_at == end

    claim = node_claim(
        "train", ["p5.48xlarge"], node_class=node_class, nodepool="h100-prod", capacity_types=(RESERVED,)
    )
    instance = provider.create(claim, types, node_class)

    assert (instance.capacity_type, instance.reservation_id, instance.reservation_type) == (
        RESERVED,
        block.id,
        "capacity-block",
    )
    assert block.launched == [instance.provider_id.rsplit("/", 1)[1]]
    tags = tags_of(ec2, block.launched[0])
    assert tags[wk.CAPACITY_RESERVATION_ID] == block.id
    assert tags[wk.CAPACITY_RESERVATION_TYPE] == "capacity-block"
    assert tags[wk.NODECLAIM] == "train"
    # Read back as EC2 lists it: still reserved, still in the block.
    again = provider.get(instance.provider_id)
    assert (again.capacity_type, again.reservation_id, again.price) == (RESERVED, block.id, 0.0)


def test_a_claim_fills_the_reservation_first_then_falls_to_the_cheapest_other_offering(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    r = proxy.add_reservation(instance_type="p5.48xlarge", zone=A, count=1)
    node_class = reserved_node_class(id=r.id)
    types = [t for t in provider.instance_types(node_class) if t.name == "p5.48xlarge"]

    both = (RESERVED, wk.CAPACITY_TYPE_ON_DEMAND)
    first = provider.create(
        node_claim("one", ["p5.48xlarge"], node_class=node_class, capacity_types=both), types, node_class
    )
    # The same (cached) offerings still say one is free: the reservation refuses, and this create falls to
    # spot or on-demand within the call, naming only the reservation as out.
    second = provider.create(
        node_claim("two", ["p5.48xlarge"], node_class=node_class, capacity_types=both), types, node_class
    )

    assert first.capacity_type == RESERVED and first.reservation_id == r.id
    assert second.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND
    assert second.reservation_id is None
    assert OfferingKey("p5.48xlarge", A, RESERVED, r.id) in second.skipped
    assert all(k.capacity_type == RESERVED for k in second.skipped)
    # The next read sees the reservation full: listed, but not available.
    (offering,) = reserved_offerings(provider.instance_types(node_class), "p5.48xlarge")
    assert (offering.available, offering.reservation.free) == (False, 0)


def test_a_reservation_that_expired_is_a_capacity_error_for_that_reservation_only(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    r = proxy.add_reservation(instance_type="p5.48xlarge", zone=A, count=2)
    node_class = reserved_node_class(id=r.id)
    types = [t for t in provider.instance_types(node_class) if t.name == "p5.48xlarge"]
    r.state = "expired"
    reserved_only = node_claim("late", ["p5.48xlarge"], node_class=node_class, capacity_types=(RESERVED,))

    with pytest.raises(InsufficientCapacity) as err:
        provider.create(reserved_only, types, node_class)

    assert err.value.offerings == [OfferingKey("p5.48xlarge", A, RESERVED, r.id)]
    assert r.launched == []


def test_catalog_reads_every_active_reservation_of_the_account(
    provider: AWSProvider, account: world.World, proxy: FaultProxy
) -> None:
    r = proxy.add_reservation(instance_type="p5.48xlarge", zone=B, count=3)
    gone = proxy.add_reservation(instance_type="p4d.24xlarge", zone=A, count=3)
    gone.state = "cancelled"

    types = provider.region_instance_types()

    (offering,) = reserved_offerings(types, "p5.48xlarge")
    assert offering.reservation is not None and (offering.reservation.id, offering.zone) == (r.id, B)
    assert reserved_offerings(types, "p4d.24xlarge") == []
