"""The pure report builders: scale-down totals, realized vs run-rate savings, idle cost, churn, blockers,
and the node / node-pool status tables."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.finops.reports import nodes as node_report
from provisioner.finops.reports import scale_down, scale_down_formats
from provisioner.finops.rows import ActionRow, BlockerRow, UsageRow
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import Node
from testkit.builders.common import NOW as T0
from testkit.builders.rows import action_row as action
from testkit.builders.rows import blocker_row, usage_row

NOW = T0 + timedelta(hours=10)
SINCE = T0 - timedelta(days=7)


def build(
    actions: Iterable[ActionRow] = (),
    blockers: Iterable[BlockerRow] = (),
    usage: Iterable[UsageRow] = (),
    **kw: Any,
) -> scale_down.ScaleDownReport:
    return scale_down.build(list(actions), list(blockers), list(usage), since=SINCE, now=NOW, **kw)


def test_realized_savings_run_from_each_action_to_now_and_the_run_rate_is_separate() -> None:
    report = build(
        [
            action("a", command_id="1", savings=2.0),
            action("b", command_id="2", time=NOW - timedelta(hours=1), savings=1.0),
        ]
    )
    assert report.total.realized_savings == pytest.approx(2.0 * 10 + 1.0 * 1)
    assert report.total.savings_per_hour == pytest.approx(3.0)
    assert report.total.run_rate_monthly == pytest.approx(3.0 * 730)


def test_team_totals_split_shared_rows_so_they_add_up_to_the_pool_totals() -> None:
    rows = [
        action("a", command_id="1", teams=("research", "vision"), savings=2.0),
        action("b", command_id="2", teams=("research",), savings=1.0),
        action("c", command_id="3", teams=(), savings=0.5, pool="cpu"),
    ]
    report = build(rows)
    teams = {t.name: t for t in report.teams}
    assert teams["research"].savings_per_hour == pytest.approx(2.0)
    assert teams["vision"].savings_per_hour == pytest.approx(1.0)
    assert teams[scale_down.NO_TEAM].savings_per_hour == pytest.approx(0.5)
    assert sum(t.savings_per_hour for t in report.teams) == pytest.approx(
        sum(p.savings_per_hour for p in report.pools)
    )
    assert sum(t.nodes_replaced + t.nodes_removed for t in report.teams) == 3


def test_rows_outside_the_window_or_pool_are_left_out() -> None:
    rows = [
        action("old", command_id="1", time=SINCE - timedelta(hours=1)),
        action("cpu", command_id="2", pool="cpu"),
        action("gpu", command_id="3"),
    ]
    report = build(rows, pool="gpu")
    assert [a.row.node for a in report.actions] == ["gpu"]
    assert [p.name for p in report.pools] == ["gpu"]


def test_idle_cost_and_gpu_idle_hours_come_from_usage() -> None:
    gpu = usage_row("g", gpu_capacity=8, gpu_allocated=2, price_per_hour=32.0, hours=2.0)
    cpu = usage_row(
        "c",
        gpu_capacity=0,
        gpu_allocated=0,
        price_per_hour=1.0,
        cpu_capacity=4000,
        cpu_allocated=1000,
        memory_capacity=16,
        memory_allocated=8,
        nodepool="cpu",
    )
    report = build(usage=[gpu, cpu])
    assert report.total.cost == pytest.approx(64.0 + 1.0)
    # GPU node: paid for its GPUs (6 of 8 idle); CPU node: the busier resource (memory, half) decides.
    assert report.total.idle_cost == pytest.approx(64.0 * 0.75 + 0.5)
    assert report.total.gpu_idle_hours == pytest.approx(12.0)


def test_a_replacement_disrupted_again_within_an_hour_counts_as_churn() -> None:
    first = action("n1", command_id="1", replacement_nodes=("n2",))
    quick = action("n2", command_id="2", time=T0 + timedelta(minutes=30), replacement_nodes=("n3",))
    late = action("n3", command_id="3", time=T0 + timedelta(hours=3))
    report = build([first, quick, late])
    assert report.churn.replacements_disrupted_within_hour == 1
    assert report.churn.pods_moved == 6
    assert report.churn.nodes_replaced == 3


def test_top_blockers_rank_the_most_frequent_first() -> None:
    def blocker(node: str, evaluation: str, kind: str, detail: str) -> BlockerRow:
        return blocker_row(node, evaluation_id=evaluation, kind=kind, detail=detail)

    rows = [blocker("n1", e, "PDB", "PDB ml/web allows 0") for e in ("e1", "e2", "e3")]
    rows += [blocker("n2", "e1", "DoNotDisruptPod", "pod ml/x")]
    report = build(blockers=rows)
    assert [(b.kind, b.evaluations, b.nodes) for b in report.blockers] == [
        ("PDB", 3, 1),
        ("DoNotDisruptPod", 1, 1),
    ]


def test_the_totals_alone_are_the_whole_report_s_totals() -> None:
    rows = [
        action("a", command_id="1", teams=("research", "vision"), savings=2.0, replacement_nodes=("n2",)),
        action("n2", command_id="2", time=T0 + timedelta(minutes=30), reason="Empty", action="delete"),
    ]
    usage = [usage_row(n, time=T0 + timedelta(hours=h)) for h in range(3) for n in ("a", "n2", "n3")]
    whole = build(rows, [blocker_row()], usage)
    totals = build(rows, [blocker_row()], usage, totals_only=True)
    assert totals.total == whole.total and totals.churn == whole.churn
    assert whole.total.cost > 0 and whole.total.realized_savings != 0 and whole.churn.pods_moved > 0
    assert (totals.pools, totals.teams, totals.reasons, totals.blockers, totals.cost_per_hour) == (
        [],
        [],
        [],
        [],
        {},
    )
    assert whole.pools and whole.teams and whole.reasons and whole.blockers and whole.cost_per_hour


def sample_report() -> scale_down.ScaleDownReport:
    rows = [
        action("a", command_id="1", reason="Empty", action="delete", replacement_type=None, savings=2.0),
        action("b", command_id="2", reason="Underutilized"),
    ]
    usage = [usage_row("a", time=T0 + timedelta(hours=h)) for h in range(5)]
    blockers = [blocker_row(kind="Budget", method="emptiness", detail="budget #0")]
    return build(rows, blockers, usage)


def test_the_html_report_is_one_self_contained_page_with_both_charts() -> None:
    page = scale_down_formats.to_html(sample_report())
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") == 2, "both charts, rendered to inline SVG at build time"
    assert "Cost per hour by pool" in page and "Saved per hour by reason" in page
    assert "<path" in page
    for headline in ("Total paid", "Realized savings", "Run-rate saved"):
        assert headline in page
    assert "savings_per_hour" not in page, "headers in words"
    assert not re.search(r"<script|<link|\bsrc=|\bhref=|@import", page)


def test_csv_and_json_carry_the_same_totals() -> None:
    report = sample_report()
    rows = list(csv.DictReader(io.StringIO(scale_down_formats.to_csv(report))))
    total = next(r for r in rows if r["section"] == "total")
    doc = json.loads(scale_down_formats.to_json(report))
    assert (
        float(total["savings_per_hour"])
        == pytest.approx(doc["total"]["savingsPerHour"])
        == pytest.approx(3.5)
    )
    assert {r["section"] for r in rows} >= {"total", "pool", "team", "reason", "blocker", "churn"}
    assert doc["actions"][0]["node"] == "a"
    assert max(p["dollars"] for p in doc["costPerHour"]["gpu"]) == pytest.approx(32.0)
    assert min(p["dollars"] for p in doc["costPerHour"]["gpu"]) == 0.0, "hours without a node are zeros"


def test_the_table_names_realized_and_estimated_separately() -> None:
    text = scale_down_formats.to_table(sample_report())
    assert "Realized savings" in text and "Run-rate" in text
    assert "By pool" in text and "Top blockers" in text


# ---- node and node-pool tables ------------------------------------------------------------------------


def node(
    name: str = "n1",
    *,
    conditions: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    gpus_label: int = 0,
    gpus_allocatable: int | None = None,
    pool: str = "gpu",
) -> StateNode:
    labels = {wk.NODEPOOL: pool, wk.INSTANCE_TYPE: "p4d.24xlarge"}
    if gpus_label:
        labels[wk.GPU_COUNT] = str(gpus_label)
        labels[wk.GPU_NAME] = "a100"
    alloc = {"cpu": "96", "memory": "1Ti"}
    if gpus_allocatable is not None:
        alloc[wk.GPU_RESOURCE] = str(gpus_allocatable)
    conds = conditions if conditions is not None else [{"type": "Ready", "status": "True"}]
    doc = {
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": unschedulable},
        "status": {"allocatable": alloc, "capacity": alloc, "conditions": conds},
    }
    return StateNode(name=name, node=Node.from_dict(doc))


READY = {"type": "Ready", "status": "True"}


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        pytest.param(
            {"conditions": [READY, {"type": "DiskPressure", "status": "True"}]}, "disk pressure", id="disk"
        ),
        pytest.param(
            {"conditions": [READY, {"type": "MemoryPressure", "status": "True"}]},
            "memory pressure",
            id="memory",
        ),
        pytest.param(
            {"conditions": [READY, {"type": "PIDPressure", "status": "True"}]}, "PID pressure", id="pid"
        ),
        pytest.param(
            {"conditions": [READY, {"type": "NetworkUnavailable", "status": "True"}]},
            "network unavailable",
            id="network",
        ),
        pytest.param({"unschedulable": True}, "scheduling disabled", id="cordoned"),
        pytest.param({"gpus_label": 8}, "GPU device plugin missing", id="gpu-absent"),
        pytest.param({"gpus_label": 8, "gpus_allocatable": 0}, "GPU device plugin missing", id="gpu-zero"),
        pytest.param(
            {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]},
            "kubelet not ready (KubeletNotReady)",
            id="kubelet",
        ),
    ],
)
def test_a_node_is_not_ready_with_its_reason(kw: dict[str, Any], reason: str) -> None:
    (row,) = node_report.node_rows(Snapshot(nodes=(node(**kw),)))
    assert row.status == "Not ready"
    assert reason in row.reasons


def test_a_healthy_gpu_node_is_ready() -> None:
    (row,) = node_report.node_rows(Snapshot(nodes=(node(gpus_label=8, gpus_allocatable=8),)))
    assert (row.status, row.reasons, row.gpus) == ("Ready", (), 8)


def test_the_nodepool_table_counts_ready_and_not_ready_nodes() -> None:
    from tests.unit.disruption.builders import node_pool

    snap = Snapshot(
        nodes=(
            node("a", gpus_label=8, gpus_allocatable=8),
            node("b", unschedulable=True),
            node("c", pool="cpu"),
        ),
        nodepools=(node_pool("gpu"), node_pool("cpu")),
    )
    rows = {r.name: r for r in node_report.nodepool_rows(snap)}
    assert (rows["gpu"].nodes, rows["gpu"].ready, rows["gpu"].not_ready) == (2, 1, 1)
    assert rows["gpu"].status == "Not ready"
    assert rows["gpu"].reasons == ("1 node(s) not ready",)
    assert rows["cpu"].status == "Ready"
    text = node_report.render_nodepools(list(rows.values()), fmt="csv")
    assert text.splitlines()[0].startswith("name,status,reasons,nodes,ready,not_ready")


def test_cost_per_hour_spreads_a_long_sample_over_the_hours_it_covers() -> None:
    sample = usage_row("a", time=T0 + timedelta(minutes=30), hours=2.0, price_per_hour=10.0)
    points = {t: v for t, v in build(usage=[sample]).cost_per_hour["gpu"] if v}
    assert points == {
        T0: pytest.approx(5.0),
        T0 + timedelta(hours=1): pytest.approx(10.0),
        T0 + timedelta(hours=2): pytest.approx(5.0),
    }


def test_a_browser_renders_the_report_offline(tmp_path: Path) -> None:
    """What a reviewer sees: headless Chromium opens the page from disk (these machines have no network,
    so anything fetched would be missing) and paints it."""
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium (apt-get install -y chromium)")
    page = tmp_path / "report.html"
    page.write_text(scale_down_formats.to_html(sample_report()))
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={shot}",
            "--window-size=1400,1200",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG")
    # A blank white page compresses to a few KB; charts and tables do not.
    assert len(data) > 30_000
