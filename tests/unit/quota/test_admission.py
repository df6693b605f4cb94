"""The admission decision: quota first, then borrowing by weight, reclaim just enough, reasons with numbers."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from provisioner.api import Department
from provisioner.api.nodepool import NodePool
from provisioner.api.team import Team
from provisioner.quota import admission
from provisioner.quota.decisions import AdmissionPlan
from provisioner.state import StateNode
from provisioner.state.objects import Pod
from testkit.builders.nodes import node_claim
from testkit.typed import present
from tests.unit.quota.builders import book, department, node_pool, pod, quota, snapshot, team

A100 = "a100"
T4 = "t4"


def decide(
    pools: list[NodePool],
    teams: list[Team],
    *,
    pending: Sequence[Pod] = (),
    running: dict[str, list[Pod]] | None = None,
    departments: Sequence[Department] = (),
    exclude: Collection[str] = (),
) -> AdmissionPlan:
    snap = snapshot(pools, pending=list(pending), running=running)
    return admission.decide(snap, book(snap, teams, list(departments)), exclude_victims=exclude)


def admitted(plan: AdmissionPlan) -> dict[str, tuple[str | None, bool]]:
    return {a.pod.key: (a.pool, a.over_quota) for a in plan.admitted}


def test_a_pod_within_quota_is_admitted_on_the_first_pool_of_its_order() -> None:
    plan = decide(
        [node_pool(A100), node_pool(T4)],
        [team("vision", quota(A100, 8), quota(T4, 8), default=(T4, A100))],
        pending=[pod("p", "vision", gpus=4)],
    )
    assert admitted(plan) == {"vision/p": (T4, False)}


def test_the_pods_own_list_wins_over_the_team_default() -> None:
    plan = decide(
        [node_pool(A100), node_pool(T4)],
        [team("vision", quota(A100, 8), quota(T4, 8), default=(T4,))],
        pending=[pod("p", "vision", pools=(A100,))],
    )
    assert admitted(plan) == {"vision/p": (A100, False)}


def test_quota_full_falls_to_the_next_pool_in_quota_before_borrowing() -> None:
    plan = decide(
        [node_pool(A100), node_pool(T4)],
        [team("vision", quota(A100, 4), quota(T4, 8), default=(A100, T4))],
        pending=[pod("p", "vision", gpus=4, preemptible=True)],
        running={A100: [pod("old", "vision", gpus=4, gated=False)]},
    )
    assert admitted(plan) == {"vision/p": (T4, False)}


def test_a_non_preemptible_pod_beyond_quota_waits_and_is_told_to_raise_the_quota() -> None:
    plan = decide(
        [node_pool(A100)],
        [team("vision", quota(A100, 16), default=(A100,))],
        pending=[pod("p", "vision", gpus=8)],
        running={A100: [pod("old", "vision", gpus=16, gated=False)]},
    )
    assert plan.admitted == []
    (hold,) = plan.held
    assert not hold.never
    assert "team vision: nvidia.com/gpu on a100 16 of 16 in use, the pod asks 8" in hold.message
    assert "raise the quota" in hold.message


def test_a_preemptible_pod_borrows_when_the_pool_has_room() -> None:
    plan = decide(
        [node_pool(A100, gpus=32)],
        [team("vision", quota(A100, 8))],
        pending=[pod("p", "vision", gpus=8, preemptible=True)],
        running={A100: [pod("old", "vision", gpus=8, gated=False)]},
    )
    assert admitted(plan) == {"vision/p": (A100, True)}


def test_over_quota_not_allowed_holds_even_a_preemptible_pod() -> None:
    plan = decide(
        [node_pool(A100, gpus=32)],
        [team("vision", quota(A100, 8, over=False))],
        pending=[pod("p", "vision", gpus=8, preemptible=True)],
        running={A100: [pod("old", "vision", gpus=8, gated=False)]},
    )
    (hold,) = plan.held
    assert "8 of 8 in use" in hold.message and "over-quota not allowed" in hold.message


def test_a_pod_that_can_never_fit_is_told_so_distinctly() -> None:
    plan = decide(
        [node_pool(A100)],
        [team("vision", quota(A100, 0, over=False))],
        pending=[pod("p", "vision", gpus=1, preemptible=True)],
    )
    (hold,) = plan.held
    assert hold.never and hold.message.startswith("can never be admitted")


def test_a_pool_without_an_entry_is_quota_zero_with_borrowing() -> None:
    plan = decide(
        [node_pool(A100, gpus=16)],
        [team("vision")],
        pending=[pod("np", "vision", gpus=1), pod("pre", "vision", gpus=1, preemptible=True)],
    )
    assert admitted(plan) == {"vision/pre": (A100, True)}
    assert [h.pod.name for h in plan.held] == ["np"] and plan.held[0].never


def test_the_department_bounds_its_teams() -> None:
    plan = decide(
        [node_pool(A100)],
        [
            team("vision", quota(A100, 16), department="research"),
            team("nlp", quota(A100, 16), department="research"),
        ],
        departments=[department("research", quota(A100, 16, over=False))],
        pending=[pod("p", "nlp", gpus=4, preemptible=True)],
        running={A100: [pod("old", "vision", gpus=16, gated=False)]},
    )
    (hold,) = plan.held
    assert "department research: nvidia.com/gpu on a100 16 of 16 in use" in hold.message


def test_borrowed_capacity_is_shared_by_weight() -> None:
    pending = [pod(f"a{i}", "vision", preemptible=True, minute=i) for i in range(12)]
    pending += [pod(f"b{i}", "nlp", preemptible=True, minute=i) for i in range(12)]
    plan = decide(
        [node_pool(A100, gpus=12)],
        [team("vision", quota(A100, 0, weight=2)), team("nlp", quota(A100, 0, weight=1))],
        pending=pending,
    )
    per_team = {"vision": 0, "nlp": 0}
    for a in plan.admitted:
        per_team[present(a.team)] += 1
    assert per_team == {"vision": 8, "nlp": 4}


def test_an_owner_reclaims_just_enough_from_borrowers_lowest_priority_then_newest() -> None:
    borrowed = [
        pod("b-old", "nlp", gpus=4, preemptible=True, gated=False, minute=1),
        pod("b-new", "nlp", gpus=4, preemptible=True, gated=False, minute=5),
        pod("b-high", "nlp", gpus=4, preemptible=True, gated=False, minute=9, priority=100),
    ]
    plan = decide(
        [node_pool(A100, gpus=12)],
        [team("vision", quota(A100, 8)), team("nlp", quota(A100, 0))],
        pending=[pod("owner", "vision", gpus=4)],
        running={A100: borrowed},
    )
    (admit,) = plan.admitted
    assert (admit.pool, admit.over_quota) == (A100, False)
    assert [v.name for v in admit.victims] == ["b-new"]


def test_no_reclaim_from_a_team_within_its_quota() -> None:
    plan = decide(
        [node_pool(A100, gpus=8)],
        [team("vision", quota(A100, 8)), team("nlp", quota(A100, 8))],
        pending=[pod("owner", "vision", gpus=4)],
        running={A100: [pod("n", "nlp", gpus=8, preemptible=True, gated=False)]},
    )
    (hold,) = plan.held
    assert "pool a100 limits: nvidia.com/gpu 8 of 8 in use" in hold.message
    assert "nothing borrowed there to reclaim" in hold.message


def test_a_victim_whose_eviction_was_blocked_is_not_chosen_again() -> None:
    plan = decide(
        [node_pool(A100, gpus=4)],
        [team("vision", quota(A100, 4)), team("nlp", quota(A100, 0))],
        pending=[pod("owner", "vision", gpus=4)],
        running={A100: [pod("n", "nlp", gpus=4, preemptible=True, gated=False)]},
        exclude={"nlp/n"},
    )
    assert plan.admitted == [] and len(plan.held) == 1


def test_a_pod_of_no_team_is_admitted_unpinned() -> None:
    plan = decide([node_pool(A100)], [team("vision")], pending=[pod("p", "other")])
    assert admitted(plan) == {"other/p": (None, False)}


def test_a_pool_whose_taint_the_pod_does_not_tolerate_is_skipped() -> None:
    tainted = node_pool(A100, taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}])
    plan = decide(
        [tainted, node_pool(T4)],
        [team("vision", quota(A100, 8), quota(T4, 8), default=(A100, T4))],
        pending=[pod("p", "vision", tolerate_gpu=False)],
    )
    assert admitted(plan) == {"vision/p": (T4, False)}


def test_each_waiting_pod_is_counted_pending_on_its_own_first_pool() -> None:
    plan = decide(
        [node_pool(A100), node_pool(T4)],
        [team("vision", quota(A100, 0), quota(T4, 0))],
        pending=[pod("a", "vision", pools=(A100,)), pod("t", "vision", pools=(T4,))],
    )
    assert {h.pod.name: h.first_pool for h in plan.held} == {"a": A100, "t": T4}
    assert all(h.reasons[0][0] == h.first_pool for h in plan.held)


def test_a_late_borrower_takes_its_fair_share_back_from_one_above_its_own() -> None:
    running = [pod(f"v{i}", "vision", preemptible=True, gated=False, minute=i) for i in range(6)]
    plan = decide(
        [node_pool(A100, gpus=6)],
        [team("vision", quota(A100, 0, weight=1)), team("nlp", quota(A100, 0, weight=2))],
        pending=[pod(f"n{i}", "nlp", preemptible=True, minute=10 + i) for i in range(6)],
        running={A100: running},
    )
    # nlp's share is 4 of the 6 borrowed GPUs: it takes 4 of vision's pods, the newest first.
    assert sorted(a.pod.name for a in plan.admitted) == ["n0", "n1", "n2", "n3"]
    assert sorted(v.name for a in plan.admitted for v in a.victims) == ["v2", "v3", "v4", "v5"]
    assert len(plan.held) == 2


def test_borrowers_at_their_fair_share_do_not_take_from_each_other() -> None:
    running = [pod(f"v{i}", "vision", preemptible=True, gated=False) for i in range(3)]
    running += [pod(f"n{i}", "nlp", preemptible=True, gated=False) for i in range(3)]
    plan = decide(
        [node_pool(A100, gpus=6)],
        [team("vision", quota(A100, 0)), team("nlp", quota(A100, 0))],
        pending=[pod("more", "vision", preemptible=True, minute=30)],
        running={A100: running},
    )
    assert plan.admitted == [] and [h.pod.name for h in plan.held] == ["more"]


def test_a_team_within_quota_reclaims_from_a_sibling_borrowing_its_departments_quota() -> None:
    plan = decide(
        [node_pool(A100)],  # no pool limits: only the department is full
        [
            team("vision", quota(A100, 4), department="research"),
            team("nlp", quota(A100, 4), department="research"),
        ],
        departments=[department("research", quota(A100, 8))],
        pending=[pod("owner", "vision", gpus=4)],
        running={
            A100: [pod(f"n{i}", "nlp", gpus=4, preemptible=True, gated=False, minute=i) for i in range(2)]
        },
    )
    (admit,) = plan.admitted
    assert (admit.pool, admit.over_quota) == (A100, False)
    assert [v.name for v in admit.victims] == ["n1"]


def test_a_pod_bound_to_a_node_not_seen_yet_still_holds_its_teams_quota() -> None:
    """The pod's watch event can come before its Node's (two watches): counted nowhere, the room it
    holds would be admitted again, over quota. Pinned, it counts on its pool; not pinned, on the pool of
    the claim that names its Node."""
    pinned = dataclasses.replace(pod("a", "vision", gated=False, pinned=A100), node_name="node-1")
    unpinned = dataclasses.replace(pod("b", "vision", gated=False), node_name="node-2")
    claim = node_claim("c2", nodepool=T4)
    claim.status.node_name = "node-2"
    teams = [team("vision", quota(A100, 1, over=False), quota(T4, 1, over=False), default=(A100, T4))]
    waiting = [pod("c", "vision", minute=1)]
    snap = snapshot([node_pool(A100), node_pool(T4)], pending=waiting)
    assert admitted(admission.decide(snap, book(snap, teams))) == {"vision/c": (A100, False)}
    snap = dataclasses.replace(
        snap, unplaced_pods=(pinned, unpinned), nodes=(StateNode(name="c2", claim=claim),)
    )
    plan = admission.decide(snap, book(snap, teams))
    assert plan.admitted == [] and [h.pod.name for h in plan.held] == ["c"]
