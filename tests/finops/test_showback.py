"""Showback of everything paid: reserved capacity charged to the teams that used it and its idle part to
its owner, FOCUS rows carrying every cost; windows that prorate rows across their edges; CSV rows that
add up to the printed total."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from typing import Any

import pytest

from provisioner.finops import window
from provisioner.finops.reports import costs, focus, reservations, scale_down
from provisioner.finops.reports.text import largest_remainder
from provisioner.finops.rows import TeamAllocation, UsageRow
from testkit.builders import NOW as T0
from testkit.builders import reservation_row, usage_row

GIB = 1024**3


def reserved_node(**overrides: Any) -> UsageRow:
    """A p5 node in reservation cr-1 ($0/h more on its own row), team vision using 6 of its 8 GPUs."""
    values: dict[str, Any] = dict(
        instance_type="p5.48xlarge",
        capacity_type="reserved",
        price_per_hour=0.0,
        nodepool="h100",
        gpu_capacity=8,
        gpu_allocated=6,
        allocations=(TeamAllocation("vision", 8000, 64 * GIB, 6),),
        pool_owner="platform",
        reservation_id="cr-1",
    )
    values.update(overrides)
    return usage_row("p5-a", **values)


def test_a_reserved_node_is_charged_at_its_reservations_price_and_the_idle_rest_to_the_owner() -> None:
    node = reserved_node()
    on_demand = usage_row("od", allocations=(TeamAllocation("vision", 8000, 64 * GIB, 2),))
    held = reservation_row(owner="research")  # 2 instances at $55.04/h, one running: ours
    found = {(c.team, c.nodepool, c.reservation): c for c in costs.lines([node, on_demand], [held])}
    vision = found[("vision", "h100", "")]
    assert vision.cost == pytest.approx(55.04 * 6 / 8), "its share of the slot it runs in"
    assert found[("platform", "h100", "")].idle_cost == pytest.approx(55.04 * 2 / 8), "idle GPUs: pool owner"
    empty_slot = found[("research", "h100", "cr-1")]
    assert empty_slot.idle_cost == pytest.approx(55.04), "the empty slot: the reservation's owner"
    paid = held.cost + on_demand.cost
    assert sum(c.total for c in found.values()) == pytest.approx(paid)
    report = reservations.build([held], since=T0, now=T0 + timedelta(hours=1))
    assert report.total.cost == pytest.approx(2 * 55.04)


def test_a_reservation_with_no_owner_is_charged_to_its_pool_as_unallocated() -> None:
    (line,) = costs.lines([], [reservation_row(running=0, used=0.0)])
    assert (line.team, line.nodepool, line.reservation) == (costs.UNALLOCATED, "h100", "cr-1")
    assert line.idle_cost == pytest.approx(2 * 55.04) and line.gpu_idle_hours == pytest.approx(16)


def test_focus_rows_carry_every_cost_with_commitment_columns_on_reserved_ones() -> None:
    rows = focus.focus_rows([reserved_node(), usage_row("od")], [reservation_row(owner="research")])
    docs = [dict(zip(focus.FOCUS_COLUMNS, r, strict=True)) for r in rows]
    assert sum(d["BilledCost"] for d in docs) == pytest.approx(2 * 55.04 + 32.0)
    used = [d for d in docs if d["CommitmentDiscountStatus"] == "Used"]
    unused = [d for d in docs if d["CommitmentDiscountStatus"] == "Unused"]
    plain = [d for d in docs if d["CommitmentDiscountId"] is None]
    assert {d["CommitmentDiscountId"] for d in used + unused} == {"cr-1"}
    assert sum(d["BilledCost"] for d in used) == pytest.approx(55.04)
    assert sum(d["BilledCost"] for d in unused) == pytest.approx(55.04)
    assert all(d["ConsumedQuantity"] is None for d in unused), "FOCUS: no consumed quantity when unused"
    assert {d["PricingCategory"] for d in used + unused} == {"Committed"}
    assert {d["CommitmentDiscountCategory"] for d in plain} == {None}
    for d in docs:
        assert d["ListUnitPrice"] * d["PricingQuantity"] == pytest.approx(d["ListCost"], abs=1e-5)
    assert json.loads(unused[0]["Tags"])["provisioner.sh/team"] == "research"


def test_any_split_of_a_period_into_windows_adds_up_to_the_whole() -> None:
    # Rows that straddle hour edges: 40 minutes from :50, 90 minutes from 1:10, a reservation of 2 h.
    rows = [
        usage_row("a", time=T0 + timedelta(minutes=50), hours=40 / 60, price_per_hour=3.0),
        usage_row("b", time=T0 + timedelta(minutes=70), hours=1.5, price_per_hour=1.0),
    ]
    held = [reservation_row(time=T0 + timedelta(minutes=30), hours=2.0, running=0, used=0.0)]
    whole = sum(c.total for c in costs.lines(rows, held))
    assert whole == pytest.approx(3.0 * 40 / 60 + 1.5 + 2 * 55.04 * 2)
    for cut in (25, 45, 60, 95, 120, 150):
        edge = T0 + timedelta(minutes=cut)
        parts = [
            sum(
                c.total
                for c in costs.lines(window.clip(rows, since=s, now=e), window.clip(held, since=s, now=e))
            )
            for s, e in ((T0, edge), (edge, T0 + timedelta(hours=4)))
        ]
        assert sum(parts) == pytest.approx(whole), f"cut at {cut} min"
    hour = scale_down.build([], [], rows, since=T0 + timedelta(hours=1), now=T0 + timedelta(hours=2))
    assert hour.total.cost == pytest.approx(3.0 * 30 / 60 + 1.0 * 50 / 60), "each row's half inside the hour"


def test_a_row_of_no_hours_is_kept_only_inside_the_window() -> None:
    at = usage_row("z", time=T0, hours=0.0)
    assert window.clip([at], since=T0, now=T0 + timedelta(hours=1)) == [at]
    assert window.clip([at], since=T0 + timedelta(seconds=1), now=T0 + timedelta(hours=1)) == []


def test_largest_remainder_rounding_adds_up_to_the_rounded_sum() -> None:
    values = [0.333, 0.333, 0.334, 1.005, 2.0049]
    rounded = largest_remainder(values)
    assert sum(rounded) == pytest.approx(round(sum(values), 2))
    assert all(abs(r - v) < 0.01 for r, v in zip(rounded, values, strict=True))


def test_the_costs_csv_rows_add_up_to_the_printed_total() -> None:
    rows = [
        usage_row(f"n{i}", time=T0 + timedelta(minutes=7 * i), hours=0.37, price_per_hour=1.0 / 3)
        for i in range(40)
    ]
    printed = costs.to_table(rows, since=T0, now=T0 + timedelta(hours=6)).splitlines()[0]
    total = printed.rsplit("$", 1)[1].split()[0]
    lines = list(csv.DictReader(io.StringIO(costs.to_csv(rows))))
    body, last = lines[:-1], lines[-1]
    assert last["team"] == "total" and last["total"] == total
    assert f"{sum(float(r['total']) for r in body):.2f}" == total
    assert f"{sum(float(r['cost']) + float(r['idle_cost']) for r in body):.2f}" == total
