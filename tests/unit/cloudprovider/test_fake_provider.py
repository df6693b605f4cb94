"""The fake provider as a product: capacity per offering, stockouts, reservations, failure and
interruption injection, the call log and the launch/delete hooks. (The shared behaviour is in
tests/providers/test_contract.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from providers.fake import FakeProvider
from provisioner.api import labels as wk
from provisioner.api.common import Operator, Requirement
from provisioner.cloudprovider import (
    CreateError,
    GangPlacement,
    Instance,
    InsufficientCapacity,
    NotFound,
    OfferingKey,
    catalog,
)
from testkit.builders import node_claim
from testkit.providers.harness_fake import fake_node_class

NODE_CLASS = fake_node_class()
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def provider(**overrides: Any) -> FakeProvider:
    return FakeProvider(clock=lambda: T0, **overrides)


def create(
    fake: FakeProvider, name: str, names: Sequence[str] = ("m5.large",), **claim_overrides: Any
) -> Instance:
    types = [t for t in fake.instance_types(NODE_CLASS) if t.name in names]
    types.sort(key=lambda t: list(names).index(t.name))
    return fake.create(
        node_claim(name, list(names), node_class=NODE_CLASS, **claim_overrides), types, NODE_CLASS
    )


def test_finite_capacity_runs_out_then_raises_naming_every_offering_tried() -> None:
    fake = provider()
    fake.set_capacity(instance_type="m5.large", count=1)

    first = create(fake, "a", zones=("us-east-1a", "us-east-1b"))
    second = create(fake, "b", zones=("us-east-1a", "us-east-1b"))
    with pytest.raises(InsufficientCapacity) as caught:
        create(fake, "c", zones=("us-east-1a", "us-east-1b"))

    assert (first.zone, second.zone) == ("us-east-1a", "us-east-1b")
    assert caught.value.offerings == [
        OfferingKey("m5.large", "us-east-1a", "on-demand"),
        OfferingKey("m5.large", "us-east-1b", "on-demand"),
    ]
    assert caught.value.kind == "capacity"


def test_deleting_an_instance_gives_its_capacity_back() -> None:
    fake = provider()
    fake.set_capacity(instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand", count=1)
    instance = create(fake, "a", zones=("us-east-1a",))
    assert fake.remaining(instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand") == 0

    fake.delete(instance.provider_id)

    assert fake.remaining(instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand") == 1
    assert create(fake, "b", zones=("us-east-1a",)).zone == "us-east-1a"


def test_set_capacity_none_makes_an_offering_unlimited_again() -> None:
    fake = provider()
    fake.set_capacity(count=0)
    fake.set_capacity(instance_type="m5.large", count=None)

    assert create(fake, "a").instance_type == "m5.large"
    assert fake.remaining(instance_type="m5.large", zone="us-east-1a", capacity_type="spot") is None


def test_mark_available_ends_a_stockout() -> None:
    fake = provider()
    fake.mark_unavailable(zone="us-east-1a")
    assert create(fake, "a", zones=("us-east-1a", "us-east-1b")).zone == "us-east-1b"

    fake.mark_available(zone="us-east-1a")

    assert create(fake, "b", zones=("us-east-1a", "us-east-1b")).zone == "us-east-1a"


def test_selectors_name_unknown_types_clearly() -> None:
    with pytest.raises(ValueError, match=r"unknown instance type 'm9\.huge'"):
        provider().mark_unavailable(instance_type="m9.huge")


def test_spot_is_preferred_to_on_demand_when_both_are_allowed() -> None:
    fake = provider()

    instance = create(fake, "a", capacity_types=(wk.CAPACITY_TYPE_ON_DEMAND, wk.CAPACITY_TYPE_SPOT))

    assert instance.capacity_type == wk.CAPACITY_TYPE_SPOT
    assert instance.price == pytest.approx(catalog.spot_price("aws", "m5.large"))


def test_not_in_requirements_exclude_zones() -> None:
    fake = provider()
    claim = node_claim("a", ["m5.large"], node_class=NODE_CLASS)
    claim.spec.requirements.append(
        Requirement(key=wk.ZONE, operator=Operator.NOT_IN, values=["us-east-1a", "us-east-1b"])
    )
    types = [t for t in fake.instance_types(NODE_CLASS) if t.name == "m5.large"]

    assert fake.create(claim, types, NODE_CLASS).zone == "us-east-1c"


def test_offerings_the_caller_flagged_unavailable_are_not_tried() -> None:
    fake = provider()
    (m5,) = [t for t in fake.instance_types(NODE_CLASS) if t.name == "m5.large"]
    flagged = m5.with_offerings(tuple(replace(o, available=o.zone != "us-east-1a") for o in m5.offerings))

    instance = fake.create(node_claim("a", ["m5.large"], node_class=NODE_CLASS), [flagged], NODE_CLASS)

    assert instance.zone == "us-east-1b"


def test_fail_next_create_is_one_shot() -> None:
    fake = provider()
    fake.fail_next_create(CreateError("bad AMI"))

    with pytest.raises(CreateError, match="bad AMI"):
        create(fake, "a")
    assert create(fake, "a").instance_type == "m5.large"
    assert fake.launched_total == 1


def test_interruptions_are_returned_once() -> None:
    fake = provider()
    instance = create(fake, "a", capacity_types=(wk.CAPACITY_TYPE_SPOT,))

    fake.interrupt(instance.provider_id)

    (event,) = fake.interruptions()
    assert (event.provider_id, event.kind, event.time) == (instance.provider_id, "spot-interruption", T0)
    assert fake.interruptions() == []
    assert fake.get(instance.provider_id).provider_id == instance.provider_id


def test_a_reclaiming_interruption_takes_the_instance_away() -> None:
    deleted: list[Instance] = []
    fake = provider(on_delete=deleted.append)
    instance = create(fake, "a", capacity_types=(wk.CAPACITY_TYPE_SPOT,))

    fake.interrupt(instance.provider_id, "preemption", reclaim=True)

    with pytest.raises(NotFound):
        fake.get(instance.provider_id)
    assert [(d.provider_id, d.state) for d in deleted] == [(instance.provider_id, "terminated")]
    assert [e.kind for e in fake.interruptions()] == ["preemption"]


def test_launch_hook_sees_the_instance_and_its_type() -> None:
    launched = []
    fake = provider(on_launch=lambda instance, instance_type: launched.append((instance, instance_type)))

    instance = create(fake, "a", names=("p5.48xlarge",))

    ((seen, instance_type),) = launched
    assert seen == instance
    assert instance_type.gpu is not None and instance_type.gpu.name == "h100"
    assert seen.provider_id == f"fake://{seen.zone}/a"
    assert seen.tags[wk.NODECLAIM] == "a"
    assert seen.tags[wk.CLUSTER] == "sim"
    assert seen.launched_at == T0


def test_the_call_log_records_every_protocol_call_in_order() -> None:
    fake = provider()
    instance = create(fake, "a")
    fake.get(instance.provider_id)
    fake.list()
    fake.delete(instance.provider_id)

    assert fake.calls == [
        ("instance_types", "default"),
        ("create", "a"),
        ("get", instance.provider_id),
        ("list",),
        ("delete", instance.provider_id),
    ]


def test_stockouts_are_hidden_from_instance_types_unless_revealed() -> None:
    hidden, revealed = provider(), provider(reveal_stockouts=True)
    for fake in (hidden, revealed):
        fake.mark_unavailable(instance_type="m5.large", capacity_type="spot")

    def spot_available(fake: FakeProvider) -> set[bool]:
        (m5,) = [t for t in fake.instance_types(NODE_CLASS) if t.name == "m5.large"]
        return {o.available for o in m5.offerings if o.capacity_type == "spot"}

    assert spot_available(hidden) == {True}
    assert spot_available(revealed) == {False}


def test_drift_is_reported_for_the_claim_of_the_instance() -> None:
    fake = provider()
    instance = create(fake, "a")
    claim = node_claim("a", ["m5.large"], node_class=NODE_CLASS)

    assert fake.is_drifted(claim, NODE_CLASS) is None
    fake.set_drifted(instance.provider_id, "image changed")
    assert fake.is_drifted(claim, NODE_CLASS) == "image changed"


def test_given_instance_types_replace_the_catalog() -> None:
    bench = catalog.load("karpenter-benchmark")[:3]
    fake = FakeProvider(instance_types=bench)

    assert [t.name for t in fake.instance_types(NODE_CLASS)] == ["fake-it-0", "fake-it-1", "fake-it-2"]
    assert fake.zones == ["zone-1", "zone-2", "zone-3"]


def test_a_state_file_carries_instances_and_launch_counts_over_a_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "cloud.json")
    first = provider(state_path=path, cluster_name="c")
    a = create(first, "claim-a")
    create(first, "claim-b")
    first.delete(a.provider_id)
    # A new process on the same file: the instance launched before is found, not launched again.
    second = provider(state_path=path, cluster_name="c")
    (kept,) = second.list()
    assert kept.nodeclaim == "claim-b"
    assert kept.launched_at == T0
    assert create(second, "claim-b").provider_id == kept.provider_id
    assert second.launches_by_claim == {"claim-a": 1, "claim-b": 1}
    create(second, "claim-a")
    assert provider(state_path=path).launches_by_claim == {"claim-a": 2, "claim-b": 1}, "a relaunch counts"


# --- create_group: all or nothing -------------------------------------------------------------------------


def create_group(
    fake: FakeProvider,
    names: list[str],
    types: Sequence[str] = ("m5.large",),
    placement: GangPlacement | None = None,
    **claim_overrides: Any,
) -> list[Instance]:
    options = [t for t in fake.instance_types(NODE_CLASS) if t.name in types]
    options.sort(key=lambda t: list(types).index(t.name))
    claims = [node_claim(n, list(types), node_class=NODE_CLASS, **claim_overrides) for n in names]
    return fake.create_group(claims, options, NODE_CLASS, placement=placement)


def test_a_group_launches_in_one_offering_with_room_for_all_of_it() -> None:
    fake = provider()
    fake.set_capacity(instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand", count=3)

    gang = create_group(fake, ["a", "b", "c", "d"], zones=("us-east-1a", "us-east-1b"))

    # 3 left in the cheapest zone: the whole gang goes to the next zone, none split.
    assert [i.nodeclaim for i in gang] == ["a", "b", "c", "d"]
    assert {(i.instance_type, i.zone, i.capacity_type) for i in gang} == {
        ("m5.large", "us-east-1b", "on-demand")
    }
    assert fake.remaining(instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand") == 3


def test_a_group_without_room_anywhere_launches_nothing_and_names_the_offerings() -> None:
    fake = provider()
    fake.set_capacity(instance_type="m5.large", capacity_type="on-demand", count=3)

    with pytest.raises(InsufficientCapacity) as caught:
        create_group(fake, ["a", "b", "c", "d"], zones=("us-east-1a", "us-east-1b"))

    assert fake.list() == [] and fake.launched_total == 0
    assert caught.value.offerings == [
        OfferingKey("m5.large", "us-east-1a", "on-demand"),
        OfferingKey("m5.large", "us-east-1b", "on-demand"),
    ]
    assert fake.remaining(instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand") == 3


def test_a_group_is_idempotent_and_a_new_member_joins_the_offering_of_the_others() -> None:
    fake = provider()
    first = create_group(
        fake, ["a", "b"], types=("m5.large", "m5.xlarge"), zones=("us-east-1b", "us-east-1c")
    )
    fake.mark_unavailable(instance_type="m5.large", zone="us-east-1b")

    again = create_group(fake, ["a", "b"], types=("m5.large", "m5.xlarge"))
    with pytest.raises(InsufficientCapacity):
        # b's offering is out: c may not land in another type or zone than its gang.
        create_group(fake, ["a", "b", "c"], types=("m5.large", "m5.xlarge"))
    fake.mark_available()
    grown = create_group(fake, ["a", "b", "c"], types=("m5.large", "m5.xlarge"))

    assert again == first
    assert fake.launched_total == 3
    assert {(i.instance_type, i.zone) for i in grown} == {("m5.large", "us-east-1b")}


def test_a_group_honours_a_placement_zone_and_tags_its_gang() -> None:
    fake = provider()
    gang = create_group(
        fake, ["a", "b"], placement=GangPlacement(gang="ml/train", zone="us-east-1c", group="pg-1")
    )

    assert {i.zone for i in gang} == {"us-east-1c"}
    assert {i.tags[wk.GANG] for i in gang} == {"ml/train"}
    assert {i.placement_group for i in gang} == {"pg-1"}


def test_an_efa_node_class_offers_the_efa_resource_on_efa_types_only() -> None:
    fake = provider()
    efa = {t.name: t for t in fake.instance_types(fake_node_class(placement={"efa": True}))}
    plain = {t.name: t for t in fake.instance_types(NODE_CLASS)}

    assert efa["p5.48xlarge"].allocatable[wk.EFA_RESOURCE] == 32
    assert wk.EFA_RESOURCE not in efa["m5.large"].capacity
    assert wk.EFA_RESOURCE not in plain["p5.48xlarge"].capacity


def reserved_offerings(fake: FakeProvider, type_name: str = "m5.large") -> list[tuple[str, float, bool, int]]:
    """(zone, price, available, free) of each reserved offering of the type, as instance_types shows it."""
    (it,) = [t for t in fake.instance_types(NODE_CLASS) if t.name == type_name]
    return [
        (o.zone, o.price, o.available, o.reservation.free if o.reservation else -1)
        for o in it.offerings
        if o.capacity_type == wk.CAPACITY_TYPE_RESERVED
    ]


def test_a_reservation_is_one_reserved_offering_whose_free_slots_launches_hold_and_deletes_give_back() -> (
    None
):
    fake = provider()
    fake.add_reservation("cr-1", instance_type="m5.large", zone="us-east-1a", count=1)
    assert reserved_offerings(fake) == [("us-east-1a", 0.0, True, 1)]
    either = (wk.CAPACITY_TYPE_RESERVED, wk.CAPACITY_TYPE_ON_DEMAND)

    first = create(fake, "a", zones=("us-east-1a",), capacity_types=either)
    second = create(fake, "b", zones=("us-east-1a",), capacity_types=either)

    assert (first.capacity_type, first.reservation_id) == (wk.CAPACITY_TYPE_RESERVED, "cr-1")
    assert (second.capacity_type, second.reservation_id) == (wk.CAPACITY_TYPE_ON_DEMAND, None)
    assert reserved_offerings(fake) == [("us-east-1a", 0.0, False, 0)]
    fake.delete(first.provider_id)
    assert [r.free for r in fake.reservations()] == [1]


def test_a_reservation_is_paid_at_the_on_demand_price_and_an_ended_one_offers_nothing() -> None:
    fake = provider()
    (m5,) = [t for t in fake.instance_types(NODE_CLASS) if t.name == "m5.large"]
    on_demand = m5.cheapest(zones={"us-east-1a"}, capacity_types={wk.CAPACITY_TYPE_ON_DEMAND})
    fake.add_reservation("cr-1", instance_type="m5.large", zone="us-east-1a", count=2)
    fake.add_reservation("cr-2", instance_type="m5.large", zone="us-east-1b", count=1)

    assert [(r.id, r.total, r.hourly_price) for r in fake.reservations()] == [
        ("cr-1", 2, on_demand.price if on_demand else None),
        ("cr-2", 1, on_demand.price if on_demand else None),
    ]
    fake.end_reservation("cr-1")
    assert [r.id for r in fake.reservations()] == ["cr-2"]
    assert reserved_offerings(fake) == [("us-east-1b", 0.0, True, 1)]


@pytest.mark.parametrize(
    ("instance_type", "count", "named"), [("no.such", 1, "no.such"), ("m5.large", -1, "count")]
)
def test_a_reservation_of_an_unknown_type_or_a_negative_count_is_refused(
    instance_type: str, count: int, named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        provider().add_reservation("cr-1", instance_type=instance_type, zone="us-east-1a", count=count)
