"""The ledger keeps whatever it is given, on SQLite and on PostgreSQL alike: random action rows come
back equal, in time order, and the savings read back add up to the savings written."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete

from provisioner.finops import tables
from provisioner.finops.ledger import Ledger
from provisioner.finops.rows import ActionRow
from testkit.builders.common import NOW as T0
from testkit.builders.rows import usage_row

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)
prices = st.floats(min_value=0, max_value=100, allow_nan=False, allow_infinity=False).map(
    lambda x: round(x, 6)
)

row_st = st.builds(
    lambda minutes, node, pool, teams, price, replacement, pods, reason: ActionRow(
        time=T0 + timedelta(minutes=minutes),
        command_id=f"c-{node}",
        action="replace" if replacement is not None else "delete",
        nodepool=pool,
        teams=tuple(sorted(set(teams))),
        node=node,
        instance_type="m5.large",
        capacity_type="spot",
        zone="us-east-1a",
        reason=reason,
        method="single-node",
        price_per_hour=price,
        replacement_type="m5.small" if replacement is not None else None,
        replacement_capacity_type="spot" if replacement is not None else None,
        replacement_price_per_hour=min(price, replacement or 0.0),
        savings_per_hour=price - min(price, replacement or 0.0),
        pods_moved=len(pods),
        pods=tuple(pods),
        detail="ünïcode ✓ detail",
    ),
    st.integers(0, 60 * 24 * 14),
    names,
    st.sampled_from(["gpu", "cpu", "inference"]),
    st.lists(st.sampled_from(["research", "vision", "platform"]), max_size=3),
    prices,
    st.none() | prices,
    st.lists(names.map(lambda n: f"ml/{n}"), max_size=5),
    st.sampled_from(["Empty", "Underutilized", "Drifted", "Expired", "ReturnToPreferred"]),
)


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    with Ledger(ledger_url) as opened:
        yield opened


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(row_st, max_size=12, unique_by=lambda r: r.node))
def test_action_rows_round_trip_and_add_up(ledger: Ledger, rows: list[ActionRow]) -> None:
    with ledger.engine.begin() as conn:
        conn.execute(delete(tables.actions))
    ledger.record_actions(rows)
    back = ledger.actions()
    assert sorted(back, key=lambda r: r.node) == sorted(rows, key=lambda r: r.node)
    assert [r.time for r in back] == sorted(r.time for r in rows)
    assert sum(r.savings_per_hour for r in back) == pytest.approx(sum(r.savings_per_hour for r in rows))
    for pool in ("gpu", "cpu"):
        assert {r.node for r in ledger.actions(pool=pool)} == {r.node for r in rows if r.nodepool == pool}


def test_a_usage_row_spanning_another_time_is_what_dataclasses_replace_makes() -> None:
    row = usage_row("n1", teams=("a", "b"), workloads=("Job/ml/x",))
    later = row.time + timedelta(minutes=5)
    moved = row.spanning(later, 0.25)
    assert moved == dataclasses.replace(row, time=later, hours=0.25)
    assert (row.time, row.hours) != (moved.time, moved.hours), "the row itself is left as it was"
