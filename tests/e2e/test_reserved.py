"""`provisioner simulate` with reserved capacity, as a user runs it: the bundled day with a 2-node H100
reservation and a Capacity Block (scenarios/reserved.yaml), read from its JSON."""

from __future__ import annotations

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


def test_a_reservation_of_an_unknown_type_is_refused_naming_the_field(tmp_path: Path) -> None:
    text = RESERVED_DAY.read_text().replace(
        "{id: cr-h100-prod, instanceType: p5.48xlarge", "{id: cr-h100-prod, instanceType: p9.huge"
    )
    result = cli("simulate", write(tmp_path, text))

    assert result.returncode != 0
    assert "p9.huge" in result.stderr and "instanceType" in result.stderr
