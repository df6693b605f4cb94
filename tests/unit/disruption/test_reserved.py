"""Disruption and reserved capacity: a reservation is paid for whether used or not, so its nodes cost
$0/h more. Consolidation moves work onto idle reserved capacity (and counts the on-demand price as saved),
and never trades a reserved node for "cheaper" capacity that is in fact paid on top of it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.api import labels as wk
from provisioner.cloudprovider.types import Offering, Reservation
from provisioner.disruption import BlockerKind
from provisioner.finops.action_rows import action_rows
from tests.unit.disruption.builders import NOW, instance_type, node_pool, pod, state_node
from tests.unit.disruption.test_planner import run

POOL = node_pool(capacity_types=("reserved", "on-demand"))
SMALL = instance_type("m.small", cpu=2, memory_gib=8, price=0.10)
LARGE = instance_type("m.large", cpu=8, memory_gib=32, price=0.40)


def with_reservation(it, *, free: int, total: int = 1):
    """The type with a reservation in its zone ($0/h: paid either way; `hourly_price` what it costs)."""
    reservation = Reservation(id="cr-1", total=total, free=free, hourly_price=it.offerings[0].price)
    offer = Offering(zone="zone-a", capacity_type=wk.CAPACITY_TYPE_RESERVED, price=0.0, available=free > 0)
    return replace(it, offerings=(*it.offerings, replace(offer, reservation=reservation)))


def reserved_node(name, *, it, pods, price=None):
    return state_node(
        name,
        it=it,
        capacity_type=wk.CAPACITY_TYPE_RESERVED,
        pods=pods,
        price=price,
        labels={wk.CAPACITY_RESERVATION_ID: "cr-1"},
    )


@pytest.mark.parametrize(
    "price",
    [
        pytest.param(None, id="priced-zero-as-launched"),
        pytest.param(0.40, id="priced-at-the-reservation-rate"),
    ],
)
def test_a_reserved_node_is_never_replaced_with_a_cheaper_type(solve, price):
    """Whatever $/h its claim carries (a cloud may price a reserved launch at the reservation's rate), a
    cheaper node outside the reservation would be paid on top of it."""
    large = with_reservation(LARGE, free=0)
    lonely = reserved_node("reserved", it=large, pods=[pod("a", cpu="1")], price=price)
    result = run([lonely], solve=solve, pools=[POOL], types={POOL.name: [SMALL, large]})
    assert result.commands == []
    blockers = [b for b in result.blockers if b.node == "reserved"]
    assert blockers and blockers[-1].kind == BlockerKind.NOT_CHEAPER


def test_a_reserved_node_and_an_on_demand_node_are_not_traded_for_one_cheaper_on_demand_node(solve):
    """Both pods fit on one m.small ($0.10/h), which looks cheaper than the pair ($0 + $0.40/h) but leaves
    the reservation idle, still paid: the on-demand node's pod moves onto the reserved node instead."""
    large = with_reservation(LARGE, free=0)
    held = reserved_node("reserved", it=large, pods=[pod("a", cpu="1")])
    extra = state_node("on-demand", it=large, pods=[pod("b", cpu="1")])
    result = run([held, extra], solve=solve, pools=[POOL], types={POOL.name: [SMALL, large]})
    (command,) = result.commands
    assert command.node_names == ("on-demand",)
    assert command.action == "delete"
    (record,) = command.records
    assert record.pods[0].destination == "reserved"


def test_work_moves_onto_idle_reserved_capacity_and_saves_the_on_demand_price(solve):
    large = with_reservation(LARGE, free=0)
    held = reserved_node("reserved", it=large, pods=[pod("a", cpu="3")])
    extra = state_node("on-demand", it=large, pods=[pod("b", cpu="3")])
    result = run([held, extra], solve=solve, pools=[POOL], types={POOL.name: [large]})
    (command,) = result.commands
    assert (command.node_names, command.action) == (("on-demand",), "delete")
    assert command.records[0].pods[0].destination == "reserved"
    (row,) = action_rows(command, time=NOW, command_id="c1", launched=[])
    assert row.savings_per_hour == pytest.approx(0.40), "the whole on-demand price: the reservation is paid"


def test_a_reserved_node_is_not_traded_with_an_on_demand_one_for_one_cheaper_on_demand_node(solve):
    """The pair ($0 + $0.40/h) fits on one m.small ($0.10/h): it looks $0.30/h cheaper, but the
    reservation would sit idle and still be paid. The on-demand node's pod moves onto the reserved node."""
    pool = node_pool(capacity_types=("reserved", "on-demand"), budgets=[{"nodes": "100%"}])
    # The reserved type is offered only through its (full) reservation, so no claim lists it as an option.
    big = with_reservation(instance_type("m.xlarge", cpu=16, memory_gib=64, price=0.80), free=0)
    big = replace(big, offerings=tuple(o for o in big.offerings if o.reservation is not None))
    held = reserved_node("reserved", it=big, pods=[pod("a", cpu="500m")])
    extra = state_node("on-demand", it=LARGE, pods=[pod("b", cpu="500m")])
    result = run([held, extra], solve=solve, pools=[pool], types={pool.name: [SMALL, LARGE, big]})
    (command,) = result.commands
    assert (command.method, command.node_names, command.action) == ("single-node", ("on-demand",), "delete")
    assert command.records[0].pods[0].destination == "reserved"


def test_an_empty_reserved_node_takes_the_work_of_an_on_demand_node_rather_than_being_deleted(solve):
    """Deleting an empty reserved node saves nothing (the reservation is paid); an on-demand node of its type
    and zone moving onto it saves the on-demand price, in one plan."""
    large = with_reservation(LARGE, free=0)
    idle = reserved_node("reserved", it=large, pods=[])
    extra = state_node("on-demand", it=large, pods=[pod("b", cpu="3")])
    result = run([idle, extra], solve=solve, pools=[POOL], types={POOL.name: [large]})
    (command,) = result.commands
    assert (command.node_names, command.action) == (("on-demand",), "delete")
    assert command.records[0].pods[0].destination == "reserved"
    kept = [b for b in result.blockers if b.node == "reserved"]
    assert kept and kept[0].kind == BlockerKind.RESERVED_FOR_WORK
    assert "on-demand" in kept[0].detail


def test_an_empty_reserved_node_nothing_could_move_onto_is_deleted(solve):
    """With no node of its type and zone outside the reservation, the slot is freed for whoever needs it."""
    large = with_reservation(LARGE, free=0)
    idle = reserved_node("reserved", it=large, pods=[])
    other = state_node("small", it=SMALL, pods=[pod("b", cpu="1")])
    result = run([idle, other], solve=solve, pools=[POOL], types={POOL.name: [SMALL, large]})
    assert [(c.method, c.node_names) for c in result.commands][:1] == [("emptiness", ("reserved",))]
