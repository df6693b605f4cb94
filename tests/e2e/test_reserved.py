"""`provisioner simulate` with reserved capacity, as a user runs it: the bundled day with a 2-node H100
reservation and a Capacity Block (scenarios/reserved.yaml), read from its JSON, its HTML report and its
ledger through `provisioner report`."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_timeline import ROOT, cli, run_json, write

RESERVED_DAY = ROOT / "scenarios" / "reserved.yaml"


@pytest.fixture(scope="module")
def day() -> dict[str, Any]:
    return run_json(RESERVED_DAY)


def claims(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in doc["nodeClaims"]}


def holding(doc: dict[str, Any], pod: str) -> list[dict[str, Any]]:
    """The claims the pod ran on, in launch order."""
    return sorted((c for c in doc["nodeClaims"] if pod in c["pods"]), key=lambda c: c["launchedAt"])


def test_the_reservation_is_filled_first_although_the_on_demand_pool_weighs_more(day: dict[str, Any]) -> None:
    for pod in ("ml/train-1-0", "ml/train-2-0"):
        first = holding(day, pod)[0]
        assert (first["nodePool"], first["capacityType"], first["capacityReservationId"]) == (
            "h100-prod",
            "reserved",
            "cr-h100-prod",
        )
        assert first["pricePerHour"] == 0.0


def test_the_overflow_goes_on_demand_and_returns_into_the_reservation_when_it_frees(
    day: dict[str, Any],
) -> None:
    overflow, back = holding(day, "ml/train-3-0")[:2]
    assert (overflow["nodePool"], overflow["capacityType"]) == ("h100-on-demand", "on-demand")
    assert (back["capacityType"], back["capacityReservationId"]) == ("reserved", "cr-h100-prod")
    (ret,) = [a for a in day["actions"] if a["method"] == "return-to-preferred"]
    assert (ret["node"], ret["replacementCapacityType"]) == (overflow["name"], "reserved")
    assert ret["savingsPerHour"] == pytest.approx(overflow["pricePerHour"])


def test_the_reservation_never_holds_more_nodes_than_its_count(day: dict[str, Any]) -> None:
    spans = [
        (c["launchedAt"], c["deletedAt"] or "9999")
        for c in day["nodeClaims"]
        if c.get("capacityReservationId") == "cr-h100-prod"
    ]
    for start, _ in spans:
        assert sum(1 for s, e in spans if s <= start < e) <= 2


def test_a_capacity_block_node_is_replaced_ahead_of_the_end_with_an_event(day: dict[str, Any]) -> None:
    in_block, after = holding(day, "ml/train-4-0")[:2]
    assert (in_block["capacityReservationId"], in_block["zone"]) == ("cb-h100-block", "us-east-1b")
    (ending,) = [a for a in day["actions"] if a["method"] == "capacity-block-ending"]
    assert ending["node"] == in_block["name"]
    assert ending["time"] < "2026-03-02T14:00:00Z" and in_block["deletedAt"] < "2026-03-02T14:00:00Z"
    assert after["capacityType"] == "on-demand" and after["deletedAt"] is None
    (event,) = [e for e in day["events"] if e["reason"] == "CapacityBlockEnding"]
    assert event["name"] == in_block["name"] and "cb-h100-block" in event["message"]
    assert not day["unschedulable"]


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, Path]:
    """The day run once more, writing its HTML report and its ledger."""
    where = tmp_path_factory.mktemp("reserved")
    page, ledger = where / "day.html", where / "day.sqlite"
    return run_json(RESERVED_DAY, "--report", page, "--ledger", ledger), page, ledger


def test_the_reservations_utilization_is_in_the_json_per_reservation_and_hour(day: dict[str, Any]) -> None:
    by_id = {r["id"]: r for r in day["reservations"]["reservations"]}
    assert set(by_id) == {"cr-h100-prod", "cb-h100-block"}
    held = by_id["cr-h100-prod"]
    # Two instances for the whole day, paid whether used or not, at the on-demand price.
    assert held["instanceHours"] == pytest.approx(48.0, abs=0.01)
    assert held["cost"] == pytest.approx(48 * 55.04, abs=1.0)
    assert 0 < held["idleHours"] < 1, "idle only while a node launched, and between train-1 and the return"
    assert held["gpuIdleHours"] == pytest.approx(8 * held["idleHours"], abs=0.1)
    hours = {h["hour"][11:16]: h for h in day["reservations"]["hours"] if h["reservation"] == "cr-h100-prod"}
    assert hours["04:00"]["idleHours"] > 0, "train-1 ended at 4h: its slot idles until the overflow returns"
    assert hours["02:00"]["idleHours"] == 0 and hours["20:00"]["idleHours"] == 0
    block = by_id["cb-h100-block"]
    assert block["kind"] == "capacity-block" and block["endsAt"].startswith("2026-03-02T14:00")
    last = [h for h in day["reservations"]["hours"] if h["reservation"] == "cb-h100-block"][-1]
    assert last["hour"].startswith("2026-03-02T13:00") and last["usedHours"] < 0.1, (
        "its last hour idles: the node was drained ahead of the end"
    )
    total = day["reservations"]["total"]
    assert total["idleCost"] == pytest.approx(held["idleCost"] + block["idleCost"], abs=0.02)


def test_the_report_and_the_ledger_show_the_same_utilization(
    reported: tuple[dict[str, Any], Path, Path],
) -> None:
    doc, page, ledger = reported
    html = page.read_text()
    assert "Reserved capacity" in html and "cr-h100-prod" in html and "Idle reserved GPUs" in html
    result = cli("report", "reservations", "--ledger", ledger, "-o", "json")
    assert result.returncode == 0, result.stderr
    from_ledger = json.loads(result.stdout)
    assert from_ledger["total"]["idleCost"] == pytest.approx(doc["reservations"]["total"]["idleCost"])
    assert from_ledger["total"]["gpuIdleHours"] == pytest.approx(doc["reservations"]["total"]["gpuIdleHours"])
    headline = cli("report", "scale-down", "--ledger", ledger)
    assert headline.returncode == 0, headline.stderr
    assert "Idle reserved GPUs: " in headline.stdout and "Idle reserved: $" in headline.stdout


def test_showback_and_focus_charge_everything_paid_reservations_included(
    reported: tuple[dict[str, Any], Path, Path],
) -> None:
    """`report costs` (table, JSON, CSV, FOCUS) sums to what the reservations were paid plus what the
    on-demand and spot nodes cost, and the reserved pool's GPU-hours are no longer free."""
    doc, _, ledger = reported
    paid = json.loads(cli("report", "reservations", "--ledger", ledger, "-o", "json").stdout)["total"]["cost"]
    nodes = doc["cost"]  # the usage rows: on-demand and spot (a reserved node costs $0/h more)
    assert paid > nodes > 0
    shown = json.loads(cli("report", "costs", "--ledger", ledger, "-o", "json").stdout)
    assert shown["total"] == pytest.approx(paid + nodes, abs=0.02)
    reserved_pool = [line for line in shown["byTeamAndPool"] if line["nodePool"] == "h100-prod"]
    assert sum(line["total"] for line in reserved_pool) > 0.9 * paid - 1
    assert {line["reservation"] for line in reserved_pool} >= {"cr-h100-prod", "cb-h100-block"}
    focus = list(
        csv.DictReader(io.StringIO(cli("report", "costs", "--ledger", ledger, "-o", "focus-csv").stdout))
    )
    assert sum(float(r["BilledCost"]) for r in focus) == pytest.approx(paid + nodes, abs=0.02)
    committed = {
        r["CommitmentDiscountId"] for r in focus if r["CommitmentDiscountStatus"] in ("Used", "Unused")
    }
    assert committed == {"cr-h100-prod", "cb-h100-block"}


def test_a_reservation_of_an_unknown_type_is_refused_naming_the_field(tmp_path: Path) -> None:
    text = RESERVED_DAY.read_text().replace(
        "{id: cr-h100-prod, instanceType: p5.48xlarge", "{id: cr-h100-prod, instanceType: p9.huge"
    )
    result = cli("simulate", write(tmp_path, text))

    assert result.returncode != 0
    assert "p9.huge" in result.stderr and "instanceType" in result.stderr


def test_with_a_consolidating_on_demand_pool_its_work_moves_onto_the_idle_reserved_node(
    tmp_path: Path,
) -> None:
    """Consolidation moves the on-demand worker onto the reserved node another worker left, saving the
    on-demand price: the reserved node stays (deleting it saves nothing), none is launched again."""
    text = RESERVED_DAY.read_text()
    on_demand = text.index("name: h100-on-demand")
    policy = text.index("consolidationPolicy: WhenEmpty", on_demand)
    text = text[:policy] + "consolidationPolicy: WhenEmptyOrUnderutilized" + text[policy + 30 :]
    doc = run_json(write(tmp_path, text))
    first = [a for a in doc["actions"] if a["reason"] != "Expired"]
    assert [(a["method"], a["node"].rsplit("-", 1)[0], a["replacement"]) for a in first] == [
        ("single-node", "h100-on-demand", None)
    ]
    (move,) = first
    assert move["savingsPerHour"] == pytest.approx(55.04)
    (landing,) = [c for c in holding(doc, move["pods"][0]) if c["name"] != move["node"]]
    assert landing["capacityType"] == "reserved" and landing["deletedAt"] is None


def _two_pools_and_workers(workers: int, *, duration: str | None) -> str:
    text = (
        "apiVersion: provisioner.sh/v1alpha1\nkind: Scenario\nmetadata: {name: r}\nspec:\n"
        "  catalog: aws\n  region: us-east-1\n"
        + (f"  duration: {duration}\n" if duration else "")
        + "  reservations:\n    - {id: cr-h100, instanceType: p5.48xlarge, zone: us-east-1a, count: 2}\n"
    )
    for name, weight, capacity in (
        ("on-demand", 50, "[on-demand]"),
        ("reserved", 10, "[reserved, on-demand]"),
    ):
        text += (
            f"---\napiVersion: provisioner.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n"
            f"  weight: {weight}\n  template:\n    spec:\n      nodeClassRef: {{kind: AWSNodeClass, name: gpu}}\n"
            "      taints: [{key: nvidia.com/gpu, value: 'true', effect: NoSchedule}]\n"
            f"      requirements:\n        - {{key: provisioner.sh/capacity-type, operator: In, values: {capacity}}}\n"
            "        - {key: provisioner.sh/gpu-name, operator: In, values: [h100]}\n"
        )
    for i in range(1, workers + 1):
        text += (
            f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: w{i}, namespace: ml}}\nspec:\n"
            "  tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n"
            "  containers:\n    - name: c\n      image: trainer\n"
            "      resources: {requests: {nvidia.com/gpu: 8}, limits: {nvidia.com/gpu: 8}}\n"
        )
    return text


@pytest.mark.parametrize("duration", [None, "1h"], ids=["static", "timeline"])
def test_the_reservation_fills_first_with_or_without_a_timeline(tmp_path: Path, duration: str | None) -> None:
    doc = run_json(write(tmp_path, _two_pools_and_workers(3, duration=duration)))
    placed = sorted((c["nodePool"], c["capacityType"], c["zone"]) for c in doc["nodeClaims"])
    assert placed == [
        ("on-demand", "on-demand", "us-east-1a"),
        ("reserved", "reserved", "us-east-1a"),
        ("reserved", "reserved", "us-east-1a"),
    ]
