"""The rules under the planner: PDB arithmetic, budget windows and limits, drift hashes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from provisioner.api.nodepool import Budget, DisruptionReason
from provisioner.disruption import nodepool_hash
from provisioner.disruption.budgets import budget_active, limit_for
from provisioner.disruption.pdbs import allowed_disruptions
from provisioner.state.objects import Pod
from tests.unit.disruption.builders import node_pool, pdb, pod

WEB = {"app": "web"}


def web_pods(bound: int, pending: int = 0) -> list[Pod]:
    return [pod(f"b{i}", labels=WEB, node="n") for i in range(bound)] + [
        pod(f"u{i}", labels=WEB) for i in range(pending)
    ]


@pytest.mark.parametrize(
    ("spec", "bound", "pending", "allowed"),
    [
        pytest.param({"min_available": 2}, 3, 0, 1, id="minAvailable-2-of-3"),
        pytest.param({"min_available": "50%"}, 4, 0, 2, id="minAvailable-50pct-of-4"),
        pytest.param({"min_available": "50%"}, 3, 0, 1, id="minAvailable-percent-rounds-up"),
        pytest.param({"max_unavailable": 1}, 3, 0, 1, id="maxUnavailable-1"),
        pytest.param({"max_unavailable": 1}, 3, 1, 0, id="maxUnavailable-spent-by-a-pending-pod"),
        pytest.param({"max_unavailable": "34%"}, 3, 0, 2, id="maxUnavailable-percent-rounds-up"),
        pytest.param({"min_available": 5}, 3, 0, 0, id="never-negative"),
        pytest.param({"disruptions_allowed": 4, "min_available": 3}, 3, 0, 4, id="status-wins"),
    ],
)
def test_allowed_disruptions(spec: dict[str, Any], bound: int, pending: int, allowed: int) -> None:
    assert allowed_disruptions(pdb("web", match=WEB, **spec), web_pods(bound, pending)) == allowed


def test_a_pdb_counts_only_pods_of_its_namespace() -> None:
    budget = pdb("web", match=WEB, min_available=1)
    others = [pod("x", labels=WEB, node="n", namespace="other")]
    assert allowed_disruptions(budget, others) == 0


@pytest.mark.parametrize(
    ("hour", "minute", "active"),
    [
        pytest.param(9, 0, True, id="at-the-tick"),
        pytest.param(16, 59, True, id="just-before-the-end"),
        pytest.param(17, 0, False, id="at-the-end"),
        pytest.param(8, 59, False, id="before-the-tick"),
    ],
)
def test_a_scheduled_budget_is_active_for_its_duration_after_each_tick(
    hour: int, minute: int, active: bool
) -> None:
    budget = Budget(nodes="0", schedule="0 9 * * *", duration="8h")
    assert budget_active(budget, datetime(2026, 11, 20, hour, minute, tzinfo=UTC)) is active


def test_the_most_restrictive_active_budget_wins() -> None:
    pool = node_pool(budgets=[{"nodes": "50%"}, {"nodes": "3"}, {"nodes": "1", "reasons": ["Drifted"]}])
    now = datetime(2026, 11, 20, tzinfo=UTC)
    assert limit_for(pool, DisruptionReason.UNDERUTILIZED, total=10, now=now)[0] == 3
    assert limit_for(pool, DisruptionReason.DRIFTED, total=10, now=now)[0] == 1


def test_no_budget_for_a_reason_means_unlimited() -> None:
    pool = node_pool(budgets=[{"nodes": "1", "reasons": ["Drifted"]}])
    assert limit_for(pool, DisruptionReason.EMPTY, total=10, now=datetime(2026, 1, 1, tzinfo=UTC))[0] is None


def test_the_pool_hash_is_stable_and_follows_the_template_but_not_the_requirements() -> None:
    base = nodepool_hash(node_pool())
    assert base == nodepool_hash(node_pool())
    assert base != nodepool_hash(node_pool(labels={"team": "a"}))
    assert base != nodepool_hash(node_pool(expire_after="24h"))
    assert base == nodepool_hash(node_pool(capacity_types=["spot"]))
    assert base == nodepool_hash(node_pool(budgets=[{"nodes": "1"}]))
