"""Priority preemption within a team, Kueue's `withinClusterQueue` options: `LowerOrNewerEqualPriority` lets
an older pod take its team's quota back from newer pods of its own priority (Kueue's "preempt newer
workloads with the same priority", in our words); `LowerPriority` never does by age."""

from __future__ import annotations

from typing import Any

from provisioner.api import Team
from provisioner.quota import admission, decisions
from tests.unit.quota.builders import book, node_pool, pod, quota, snapshot

L4 = "l4"


def _team(policy: str, gpus: int = 3) -> Team:
    spec: dict[str, Any] = {
        "namespaces": ["x"],
        "quotas": [quota(L4, gpus, over=False)],
        "preemption": {"withinTeam": policy},
    }
    return Team.model_validate({"metadata": {"name": "x"}, "spec": spec})


def _decide(policy: str) -> decisions.AdmissionPlan:
    # x owns 3 and runs w1 (priority 2), w3 (priority 1, minute 10) and w2 (priority 1, minute 11); a
    # priority 1 pod created at minute 5 (a requeued one keeps its age) waits.
    running = [
        pod("w1", "x", priority=2, preemptible=True, gated=False, minute=10),
        pod("w3", "x", priority=1, preemptible=True, gated=False, minute=10),
        pod("w2", "x", priority=1, preemptible=True, gated=False, minute=11),
    ]
    snap = snapshot(
        [node_pool(L4)],
        pending=[pod("incoming", "x", priority=1, preemptible=True, minute=5)],
        running={L4: running},
    )
    return admission.decide(snap, book(snap, [_team(policy)], []))


def test_an_older_pod_preempts_the_newest_of_its_priority_when_the_team_says_so() -> None:
    plan = _decide("LowerOrNewerEqualPriority")
    (admit,) = plan.admitted
    assert admit.pod.name == "incoming"
    assert [v.name for v in admit.victims] == ["w2"]


def test_by_default_equal_priority_never_gives_way_by_age() -> None:
    plan = _decide("LowerPriority")
    assert plan.admitted == [] or all(not a.victims for a in plan.admitted)
    assert [h.pod.name for h in plan.held] == ["incoming"]


def test_a_newer_pod_of_the_same_priority_takes_nothing_from_an_older_one() -> None:
    running = [pod("old", "x", priority=1, preemptible=True, gated=False, minute=1)]
    team = _team("LowerOrNewerEqualPriority", gpus=1)
    snap = snapshot(
        [node_pool(L4)],
        pending=[pod("new", "x", priority=1, preemptible=True, minute=9)],
        running={L4: running},
    )
    plan = admission.decide(snap, book(snap, [team], []))
    assert [h.pod.name for h in plan.held] == ["new"] and not plan.admitted
