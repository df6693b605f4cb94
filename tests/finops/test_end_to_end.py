"""Planner to ledger to report, on SQLite and PostgreSQL: every dollar saved traces to one action row,
and the rows add up to the drop in $/h."""

from __future__ import annotations

from datetime import timedelta

import pytest

from provisioner.disruption import plan
from provisioner.finops.action_rows import action_rows, blocker_rows
from provisioner.finops.ledger import Ledger
from provisioner.finops.meter import UsageMeter
from provisioner.finops.reports import scale_down
from tests.unit.disruption.builders import NOW, instance_type, node_pool, pod, snapshot, state_node
from tests.unit.disruption.conftest import real_or_standin


def test_a_plan_recorded_in_the_ledger_reports_the_drop_in_cost(ledger_url):
    gpu = instance_type("p.gpu", cpu=8, memory_gib=64, price=3.0, gpus=1)
    small = instance_type("m.small", cpu=2, memory_gib=8, price=0.1)
    pools = [node_pool(budgets=[{"nodes": "100%"}])]
    nodes = [
        state_node("job-done", it=gpu),
        state_node("cpu-on-gpu", it=gpu, pods=[pod("web", cpu="1")]),
        state_node("training", it=gpu, pods=[pod("train", cpu="7500m", gpus=1)]),
    ]
    snap = snapshot(nodes, pools=pools)
    result = plan(snap, instance_types={"default": [small, gpu]}, now=NOW, solve=real_or_standin())
    before = sum(n.price for n in nodes)
    after = (
        before
        - sum(n.price for n in nodes if n.name in result.disrupted)
        + sum(c.price for cmd in result.commands for c in cmd.replacements)
    )
    with Ledger(ledger_url) as ledger:
        planned = [
            row
            for index, command in enumerate(result.commands)
            for row in action_rows(command, time=NOW, command_id=f"eval-1-{index}")
        ]
        blocking = blocker_rows(result, evaluation_id="eval-1")
        stored, blocked = ledger.record_actions(planned), ledger.record_blockers(blocking)
        meter = UsageMeter(interval=timedelta(minutes=5))
        meter.observe(snap, NOW - timedelta(hours=1))
        ledger.record_usage(meter.flush(NOW))
        actions, blockers, usage = ledger.actions(), ledger.blockers(), ledger.usage()
    assert stored == 2 and {a.node for a in actions} == {"job-done", "cpu-on-gpu"}
    assert blocked == len(blockers) and {b.node for b in blockers} == {"training"}
    report = scale_down.build(
        actions, blockers, usage, since=NOW - timedelta(days=1), now=NOW + timedelta(hours=1)
    )
    assert report.total.savings_per_hour == pytest.approx(before - after) == pytest.approx(5.9)
    assert report.total.realized_savings == pytest.approx(5.9)
    assert report.total.gpu_idle_hours == pytest.approx(2.0)
