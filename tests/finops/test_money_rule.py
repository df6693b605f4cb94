"""The one money rule (`provisioner.finops.money`) in isolation, and over Karpenter's own disruption
scenarios run through `provisioner simulate --ledger`: no command claims a saving the fleet's $/h does
not show once its replacements are up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from provisioner.finops import money
from provisioner.finops.ledger import Ledger
from provisioner.finops.rows import ActionRow, UsageRow
from tests.e2e import test_parity as parity
from tests.e2e import test_timeline as timeline


@pytest.mark.parametrize(
    ("reason", "method", "removed", "launched", "evicted", "claimed"),
    [
        pytest.param("Underutilized", "single-node", 4.0, 1.5, 0.0, 2.5, id="consolidation-replace"),
        pytest.param("Empty", "emptiness", 4.0, 0.0, 0.0, 4.0, id="consolidation-delete"),
        pytest.param("ReturnToPreferred", "return-to-preferred", 0.80, 0.36, 0.0, 0.44, id="back-to-spot"),
        pytest.param("ReturnToPreferred", "return-to-preferred", 55.0, 0.0, 0.0, 55.0, id="into-reservation"),
        pytest.param("Underutilized", "single-node", 4.0, 0.0, 1.0, 3.0, id="bare-pods-share-left-out"),
        pytest.param("Underutilized", "single-node", 0.80, 0.36, 0.80, 0.0, id="bare-pod-never-a-loss"),
        pytest.param("Expired", "expiration", 0.17, 0.17, 0.0, 0.0, id="expiration-same-type"),
        pytest.param("Expired", "expiration", 0.17, 0.0, 0.0, 0.0, id="expiration-no-replacement"),
        pytest.param("Drifted", "drift", 4.0, 1.0, 0.0, 0.0, id="drift-cheaper"),
        pytest.param("Expired", "capacity-block-ending", 0.0, 55.0, 0.0, 0.0, id="block-ending"),
        pytest.param("Interrupted", "interruption", 1.0, 0.0, 0.0, 0.0, id="interruption"),
        pytest.param("Repair", "repair", 1.0, 1.0, 0.0, 0.0, id="repair"),
    ],
)
def test_only_moves_made_to_save_claim_removed_minus_launched(
    reason: str, method: str, removed: float, launched: float, evicted: float, claimed: float
) -> None:
    got = money.claimed_saving(
        reason=reason, method=method, removed=removed, launched=launched, evicted=evicted
    )
    assert got == pytest.approx(claimed)
    assert got <= money.change_per_hour(removed, launched) + 1e-12 or not money.is_saving(reason, method)


def test_a_row_written_by_an_older_program_is_judged_by_the_rule_not_its_stored_saving() -> None:
    old = ActionRow(
        time=datetime(2026, 3, 2, tzinfo=UTC),
        command_id="c",
        action="delete",
        nodepool="p",
        teams=(),
        node="n",
        instance_type="t",
        capacity_type="on-demand",
        zone="z",
        reason="Expired",
        method="expiration",
        price_per_hour=0.17,
        replacement_type=None,
        replacement_capacity_type=None,
        replacement_price_per_hour=0.0,
        savings_per_hour=0.17,
        pods_moved=1,
    )
    expected: tuple[float, bool, object] = (0.0, False, pytest.approx(0.17))
    assert (old.claimed_per_hour, old.is_saving, old.change_per_hour) == expected


# Karpenter's disruption scenarios (tests/e2e/test_parity.py), with the ledger -----------------------------


def _expiring() -> str:
    text = timeline.scenario(duration="4h")
    text += timeline.gpu_pool(types="[g6.xlarge]", capacity="[on-demand]").replace(
        "      taints:\n", "      expireAfter: 1h\n      terminationGracePeriod: 30m\n      taints:\n"
    )
    pinned = timeline.workload("Deployment", "serve", count=1, gpus=1).replace(
        "      labels: {app: serve}\n",
        "      labels: {app: serve}\n      annotations: {provisioner.sh/do-not-disrupt: 'true'}\n",
    )
    return text + pinned + timeline.PDB_NONE_MAY_GO.replace("small", "serve")


def _pdb_empty_node() -> str:
    text = timeline.scenario(
        duration="2h",
        timeline="    - at: 30m\n      delete:\n        - {kind: Job, namespace: ml, name: train}\n",
    )
    text += timeline.gpu_pool(types="[g6.xlarge]", consolidate_after="5m", capacity="[on-demand]")
    return text + timeline.workload("Job", "train", count=1, gpus=1) + parity.AGENT_DAEMONSET


def _bare_pod() -> str:
    """A bare Pod (nothing recreates it) beside a Deployment's on a node that expires: evicted for good."""
    text = timeline.scenario(duration="3h")
    text += timeline.gpu_pool(types="[g6.xlarge, g6.12xlarge]").replace(
        "      taints:\n", "      expireAfter: 1h\n      taints:\n"
    )
    text += timeline.workload("Deployment", "serve", count=1, gpus=1)
    return text + parity.pod(
        "notebook",
        requests="{cpu: '2', nvidia.com/gpu: '1'}",
        spec="  tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n",
    )


SCENARIOS = {
    "expiration-do-not-disrupt-pdb": _expiring,
    "do-not-disrupt-lapses": lambda: parity.underused_gpu_node("2h"),
    "do-not-disrupt-invalid": lambda: parity.underused_gpu_node("forever"),
    "pdb-daemonset-empty-node": _pdb_empty_node,
    "bare-pod": _bare_pod,
}


def _fleet_rate(usage: list[UsageRow], at: datetime) -> float:
    """The fleet's $/h at a moment, from the ledger's usage rows (each node billed launch to deletion)."""
    return sum(
        u.price_per_hour for u in usage if u.time <= at < u.time + timedelta(hours=u.hours) and u.hours > 0
    )


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_no_command_claims_a_saving_the_fleets_cost_does_not_show(tmp_path: Path, name: str) -> None:
    path = timeline.write(tmp_path, SCENARIOS[name]())
    doc = timeline.run_json(path, "--ledger", tmp_path / "l.sqlite")
    with Ledger(tmp_path / "l.sqlite") as ledger:
        actions, usage = ledger.actions(), ledger.usage()
    assert actions, f"{name}: the scenario disrupts nothing"
    first: dict[str, datetime] = {}
    last: dict[str, datetime] = {}
    for u in usage:
        first[u.node] = min(first.get(u.node, u.time), u.time)
        end = u.time + timedelta(hours=u.hours)
        last[u.node] = max(last.get(u.node, end), end)
    commands: dict[str, list[ActionRow]] = {}
    for a in actions:
        commands.setdefault(a.command_id, []).append(a)
    second = timedelta(seconds=1)
    for rows in commands.values():
        new = {n for a in rows for n in a.replacement_nodes}
        start = min([a.time for a in rows] + [first[n] for n in new if n in first])
        up = max([last[a.node] for a in rows if a.node in last] + [first[n] for n in new if n in first])
        fell = _fleet_rate(usage, start - second) - _fleet_rate(usage, up + second)
        claimed = sum(a.savings_per_hour for a in rows)
        assert claimed == pytest.approx(sum(a.claimed_per_hour for a in rows))
        assert fell >= claimed - 1e-6, (
            f"{name}: {rows[0].method} claims ${claimed:.4f}/h, fleet fell ${fell:.4f}/h"
        )
        for a in rows:
            if not a.is_saving:
                assert a.savings_per_hour == 0.0, f"{a.method} is not a saving"
    claimed_in_doc = sum(a["savingsPerHour"] for a in doc["actions"])
    assert claimed_in_doc == pytest.approx(sum(a.savings_per_hour for a in actions))
