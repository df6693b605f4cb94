"""Node repair decisions (provisioner.disruption.repair): tolerations, Karpenter's 20% rule (rounded up,
so a one-node pool repairs), budgets that apply to every reason, and the NVIDIA GPU signal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from provisioner.api import labels as wk
from provisioner.disruption.repair import DEFAULT_POLICIES, Unhealthy, assess, gpus_withdrawn, plan
from provisioner.state.objects import Node
from testkit.builders import node, node_claim, node_pool

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def sick(name: str, *, pool: str = "default", minutes: int = 31) -> Unhealthy:
    since = NOW - timedelta(minutes=minutes)
    return Unhealthy(name, name, pool, "Ready", "Unknown", since, due=minutes >= 30)


def test_one_unhealthy_node_of_one_is_repaired_and_two_of_three_are_held() -> None:
    assert [
        u.node for u in plan([sick("a")], pools={}, totals={"default": 1}, disrupting={}, now=NOW).repair
    ] == ["a"]
    held = plan([sick("a"), sick("b")], pools={}, totals={"default": 3}, disrupting={}, now=NOW)
    assert held.repair == () and "2 of 3 nodes" in held.held["default"]
    ten = plan([sick("a"), sick("b")], pools={}, totals={"default": 10}, disrupting={}, now=NOW)
    assert [u.node for u in ten.repair] == ["a", "b"], "20% of 10 is 2"


def test_a_condition_within_its_toleration_waits() -> None:
    assert plan([sick("a", minutes=29)], pools={}, totals={"default": 5}, disrupting={}, now=NOW).repair == ()


def test_repairs_stay_within_the_budgets_that_cover_every_reason() -> None:
    pools = {"default": node_pool("default", disruption={"budgets": [{"nodes": "1"}]})}
    result = plan(
        [sick("a", minutes=40), sick("b")], pools=pools, totals={"default": 10}, disrupting={}, now=NOW
    )
    assert [u.node for u in result.repair] == ["a"], "the oldest failure first, one as the budget says"
    busy = plan([sick("a")], pools=pools, totals={"default": 10}, disrupting={"default": 1}, now=NOW)
    assert busy.repair == () and "budget" in busy.held["default"]
    only_drift = {
        "default": node_pool("default", disruption={"budgets": [{"nodes": "0", "reasons": ["Drifted"]}]})
    }
    assert plan([sick("a")], pools=only_drift, totals={"default": 10}, disrupting={}, now=NOW).repair


def _with_conditions(n: Node, *conditions: dict[str, str]) -> Node:
    raw = {**n.raw, "status": {**n.raw["status"], "conditions": list(conditions)}}
    return Node.from_dict(raw)


def test_assess_reads_the_condition_and_its_transition_time() -> None:
    since = (NOW - timedelta(minutes=12)).isoformat()
    n = _with_conditions(
        node("n", gpus=8),
        {"type": "Ready", "status": "True", "lastTransitionTime": since},
        {"type": "AcceleratedHardwareReady", "status": "False", "lastTransitionTime": since},
    )
    (found,) = assess([(n, node_claim("n"))], policies=DEFAULT_POLICIES, now=NOW, withdrawn_since={})
    assert (found.condition, found.due) == ("AcceleratedHardwareReady", True), "tolerated 10 minutes"
    healthy = _with_conditions(node("h"), {"type": "Ready", "status": "True", "lastTransitionTime": since})
    assert assess([(healthy, node_claim("h"))], policies=DEFAULT_POLICIES, now=NOW, withdrawn_since={}) == []


def test_gpus_withdrawn_is_allocatable_below_capacity() -> None:
    n = node("n", gpus=8)
    assert not gpus_withdrawn(n)
    raw = {
        **n.raw,
        "status": {
            **n.raw["status"],
            "allocatable": {**n.raw["status"]["allocatable"], wk.GPU_RESOURCE: "7"},
        },
    }
    assert gpus_withdrawn(Node.from_dict(raw))
