"""Kueue's fair-sharing, cohort and scheduler cases (pkg/scheduler/scheduler_test.go,
pkg/scheduler/preemption/fairsharing, the hierarchical-cohort cases) that fit our model, run through
`provisioner simulate`, in our own words: a Team is a ClusterQueue, a Department a cohort below the pool,
the pool's limits the root cohort's capacity."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.e2e.test_kueue_cases import sized
from tests.e2e.test_quota_cases import (
    at,
    department,
    entry,
    events,
    prioritized,
    step,
    team,
)
from tests.e2e.test_teams import deployment, l4_pool, nodes_of, scenario
from tests.e2e.test_timeline import run_json, write

LENDS_2 = 'lendingLimit: {nvidia.com/gpu: "2"}'


def test_fair_shares_leave_out_what_a_lender_keeps_back(tmp_path: Path) -> None:
    # Pool of 8; y owns 6 and lends at most 2, so 4 stay y's: borrowers share 4, two each. a took all 4
    # first; b arrives and takes its 2 back (with the 4 counted as borrowable it would get nothing).
    text = (
        scenario(timeline=at("30m", step("b", "b", replicas=4, preemptible=True)))
        + l4_pool(limit=8)
        + team("y", entry("l4", 6, extra=LENDS_2))
        + team("a", entry("l4", 0))
        + team("b", entry("l4", 0))
        + deployment("a", "a", replicas=4, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert len(nodes_of(doc, "a/")) == 2
    assert len(nodes_of(doc, "b/")) == 2
    assert len(events(doc, "Reclaimed")) == 2


def _wide_pool(limit: int) -> str:
    """The L4 pool, with nodes of 4 and 8 GPUs too, for pods that ask several at once."""
    return l4_pool(limit=limit).replace(
        "values: [g6.xlarge]", "values: [g6.xlarge, g6.12xlarge, g6.48xlarge]"
    )


def _lender_and_borrower(tmp_path: Path, *, lends: int, asks: int) -> dict[str, Any]:
    """Kueue's "hierarchical cohort respects lending limit when borrowing": lender owns 10 and lends at
    most `lends`; borrower owns 5 (borrowingLimit 10) and runs 5; a pod asking `asks` GPUs arrives."""
    waiting = sized("more", "borrower", priority=0, gpus=asks, indent="        ")
    text = (
        scenario(timeline=at("30m", waiting))
        + _wide_pool(15)
        + team("lender", entry("l4", 10, extra=f'lendingLimit: {{nvidia.com/gpu: "{lends}"}}'))
        + team("borrower", entry("l4", 5, extra='borrowingLimit: {nvidia.com/gpu: "10"}'))
        + deployment("base", "borrower", replicas=5)
    )
    return run_json(write(tmp_path, text))


def test_kueue_a_borrower_may_not_take_more_than_the_lender_lends(tmp_path: Path) -> None:
    doc = _lender_and_borrower(tmp_path, lends=3, asks=4)
    assert "borrower/more-0" not in nodes_of(doc, "borrower/")
    (held,) = [u["reasons"][0]["reason"] for u in doc["unschedulable"] if u["pod"] == "borrower/more-0"]
    assert "kept by its lenders (lendingLimit)" in held


def test_kueue_a_borrower_may_take_all_the_lender_lends(tmp_path: Path) -> None:
    doc = _lender_and_borrower(tmp_path, lends=5, asks=5)
    assert "borrower/more-0" in nodes_of(doc, "borrower/")


def test_kueue_the_team_borrowing_less_from_the_root_goes_first(tmp_path: Path) -> None:
    # Kueue's "in a hierarchical cohort, workload borrowing less is scheduled first": g's department owns
    # the pool's one GPU, b (no department, higher priority) would borrow it from the root: g gets it.
    text = (
        scenario(
            timeline=at(
                "30m",
                prioritized("hi", "b", 3, preemptible=True, indent="        ")
                + prioritized("lo", "g", 0, preemptible=True, indent="        "),
            )
        )
        + l4_pool(limit=1)
        + department("d", entry("l4", 1))
        + team("g", entry("l4", 0), department="d")
        + team("b", entry("l4", 0))
    )
    doc = run_json(write(tmp_path, text))
    assert nodes_of(doc, "g/") == ["g/lo-0"] and nodes_of(doc, "b/") == []


def gang(name: str, namespace: str, size: int, *, priority: int = 0, preemptible: bool = True) -> str:
    """A Kueue plain pod group of `size` 1-GPU pods (admitted whole or not at all), arriving at 30m."""
    text = deployment(name, namespace, replicas=size, preemptible=preemptible, indent="        ")
    text = re.sub(
        r"^( *)labels: \{app: ([^,}]+)(.*)\}$",
        rf"\1labels: {{app: \2\3, kueue.x-k8s.io/pod-group-name: {name}}}\n"
        rf'\1annotations: {{kueue.x-k8s.io/pod-group-total-count: "{size}"}}',
        text,
        flags=re.M,
    )
    return re.sub(r"^( *)tolerations:", rf"\1priority: {priority}\n\1tolerations:", text, flags=re.M)


def _two_borrowing_gangs(tmp_path: Path, *, first: int, second: int) -> dict[str, Any]:
    """Kueue's "two workloads can borrow the same resources ... in the same cycle": three teams own 2 GPUs
    each of a 6-GPU pool and may borrow 2 more; gangs of `first` (priority -1, team one) and `second`
    (priority -2, team two) arrive together."""
    limit = 'borrowingLimit: {nvidia.com/gpu: "2"}'
    text = (
        scenario(
            timeline=at("30m", gang("w1", "one", first, priority=-1), gang("w2", "two", second, priority=-2))
        )
        + l4_pool(limit=6)
        + "".join(team(name, entry("l4", 2, extra=limit)) for name in ("one", "two", "three"))
    )
    return run_json(write(tmp_path, text))


def test_kueue_two_gangs_borrow_together_when_the_pool_holds_both(tmp_path: Path) -> None:
    doc = _two_borrowing_gangs(tmp_path, first=3, second=3)
    assert len(nodes_of(doc, "one/")) == 3 and len(nodes_of(doc, "two/")) == 3


def test_kueue_only_the_first_gang_borrows_when_the_pool_cannot_hold_both(tmp_path: Path) -> None:
    doc = _two_borrowing_gangs(tmp_path, first=4, second=3)
    assert len(nodes_of(doc, "one/")) == 4 and nodes_of(doc, "two/") == []


def _in_quota_and_borrowing(tmp_path: Path, *, borrows: int) -> dict[str, Any]:
    """Kueue's "cannot borrow if cohort was assigned and would result in overadmission": alpha and beta
    own 5 each of a 10-GPU pool (beta may borrow 2); alpha's gang of 4 and beta's of 5 + `borrows`
    arrive together."""
    text = (
        scenario(timeline=at("30m", gang("a", "alpha", 4), gang("b", "beta", 5 + borrows)))
        + l4_pool(limit=10)
        + team("alpha", entry("l4", 5))
        + team("beta", entry("l4", 5, extra='borrowingLimit: {nvidia.com/gpu: "2"}'))
    )
    return run_json(write(tmp_path, text))


def test_kueue_a_gang_may_not_borrow_what_another_team_was_just_given(tmp_path: Path) -> None:
    doc = _in_quota_and_borrowing(tmp_path, borrows=2)
    assert len(nodes_of(doc, "alpha/")) == 4 and nodes_of(doc, "beta/") == []


def test_kueue_a_gang_borrows_what_is_left_after_another_team_was_given_its_share(tmp_path: Path) -> None:
    doc = _in_quota_and_borrowing(tmp_path, borrows=1)
    assert len(nodes_of(doc, "alpha/")) == 4 and len(nodes_of(doc, "beta/")) == 6


def test_kueue_a_gang_held_by_its_borrowing_limit_does_not_block_another_team(tmp_path: Path) -> None:
    # Kueue's "preemption while borrowing, workload waiting for preemption should not block a borrowing
    # workload in another CQ": shared owns the pool's 4; a owns none and may borrow 3, runs 2 and wants a
    # gang of 3 more (beyond its limit); b, owning none, borrows 1 at once.
    text = (
        scenario(timeline=at("30m", gang("more", "a", 3), gang("one", "b", 1)))
        + l4_pool(limit=4)
        + team("shared", entry("l4", 4))
        + team("a", entry("l4", 0, extra='borrowingLimit: {nvidia.com/gpu: "3"}'))
        + team("b", entry("l4", 0))
        + deployment("base", "a", replicas=2, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert len(nodes_of(doc, "a/")) == 2 and nodes_of(doc, "b/") == ["b/one-0"]


def _running(name: str, namespace: str, priority: int) -> str:
    return prioritized(name, namespace, priority, preemptible=True)


def test_kueue_minimal_preemptions_when_the_team_is_exhausted(tmp_path: Path) -> None:
    # Kueue's "minimal preemptions when target queue is exhausted": three teams own 2 each of a 6-GPU
    # pool; alpha runs a1, a2 (priority -2) and a3 (-1), beta three at priority 0. A gang of 2 at
    # priority 0 comes to alpha: a1 and a2 give way, nothing is taken from beta.
    text = (
        scenario(timeline=at("30m", gang("incoming", "alpha", 2, priority=0)))
        + l4_pool(limit=6)
        + "".join(team(name, entry("l4", 2)) for name in ("alpha", "beta", "gamma"))
        + _running("a1", "alpha", -2)
        + _running("a2", "alpha", -2)
        + _running("a3", "alpha", -1)
        + "".join(_running(f"b{i}", "beta", 0) for i in (1, 2, 3))
    )
    doc = run_json(write(tmp_path, text))
    assert sorted(e["name"] for e in events(doc, "Preempted")) == ["a1-0", "a2-0"]
    assert not events(doc, "Reclaimed")
    assert nodes_of(doc, "alpha/") == ["alpha/a3-0", "alpha/incoming-0", "alpha/incoming-1"]
    assert len(nodes_of(doc, "beta/")) == 3


def test_kueue_only_a_pod_group_within_its_quota_may_preempt(tmp_path: Path) -> None:
    # Kueue's "A workload is only eligible to do preemptions if it fits fully within nominal quota":
    # alpha and beta own 2 each of a 4-GPU pool and run one pod each at priority -1; a gang of 3 at
    # priority 1 comes to alpha: it could never run within alpha's quota, so it preempts nothing, waits.
    text = (
        scenario(timeline=at("30m", gang("incoming", "alpha", 3, priority=1)))
        + l4_pool(limit=4)
        + team("alpha", entry("l4", 2))
        + team("beta", entry("l4", 2))
        + _running("a1", "alpha", -1)
        + _running("b1", "beta", -1)
    )
    doc = run_json(write(tmp_path, text))
    assert not events(doc, "Preempted") and not events(doc, "Reclaimed")
    assert nodes_of(doc, "alpha/") == ["alpha/a1-0"]


def test_kueue_a_pod_group_needing_a_reclaim_goes_before_one_that_cannot_run(tmp_path: Path) -> None:
    # Kueue's "workload requiring reclaimation prioritized over wl in another full cq" (GPUs / 5): alpha
    # and beta own 2 each of a 4-GPU pool, gamma none; alpha runs 1, gamma borrows 2 (priority 0 and 1).
    # Gangs of 2 come to alpha (it would have to borrow what is not there) and to beta (its own quota):
    # beta's gang takes gamma's lower-priority pod back and runs; alpha's waits and takes nothing.
    text = (
        scenario(
            timeline=at(
                "30m", gang("w1", "alpha", 2, preemptible=True), gang("w2", "beta", 2, preemptible=False)
            )
        )
        + l4_pool(limit=4)
        + team("alpha", entry("l4", 2))
        + team("beta", entry("l4", 2))
        + team("gamma", entry("l4", 0))
        + deployment("held", "alpha", replicas=1)
        + _running("g0", "gamma", 0)
        + _running("g1", "gamma", 1)
    )
    doc = run_json(write(tmp_path, text))
    assert [e["name"] for e in events(doc, "Reclaimed")] == ["g0-0"]
    assert nodes_of(doc, "beta/") == ["beta/w2-0", "beta/w2-1"]
    assert nodes_of(doc, "alpha/") == ["alpha/held-0"]
    assert nodes_of(doc, "gamma/") == ["gamma/g1-0"]


def test_kueue_a_pod_group_that_cannot_fit_does_not_block_a_borrower(tmp_path: Path) -> None:
    # Kueue's "capacity not blocked when lending clusterqueue can reclaim": a owns the pool's 2 and runs
    # 1; a gang of 2 more for a can never fit beside it, while b's one pod borrows a's free GPU at once.
    text = (
        scenario(timeline=at("30m", gang("more", "a", 2, preemptible=True), gang("one", "b", 1)))
        + l4_pool(limit=2)
        + team("a", entry("l4", 2))
        + team("b", entry("l4", 0))
        + deployment("first", "a", replicas=1)
    )
    doc = run_json(write(tmp_path, text))
    assert nodes_of(doc, "a/") == ["a/first-0"] and nodes_of(doc, "b/") == ["b/one-0"]


def _three_teams(tmp_path: Path, running: dict[str, int], incoming: tuple[str, int]) -> dict[str, Any]:
    """Kueue's fair-sharing preemption cases (preemption_fair_test.go): teams a, b and c own 3 each of a
    9-GPU pool and run `running` preemptible 1-GPU pods; a gang `incoming` (team, size) arrives at 30m."""
    who, size = incoming
    text = (
        scenario(timeline=at("30m", gang("incoming", who, size)))
        + l4_pool(limit=9)
        + "".join(team(name, entry("l4", 3)) for name in ("a", "b", "c"))
        + "".join(deployment("run", name, replicas=n, preemptible=True) for name, n in running.items() if n)
    )
    return run_json(write(tmp_path, text))


def _taken(doc: dict[str, Any]) -> list[str]:
    return sorted(e["namespace"] for e in events(doc, "Reclaimed"))


def test_kueue_fair_reclaim_nominal_from_the_team_using_the_most(tmp_path: Path) -> None:
    doc = _three_teams(tmp_path, {"a": 3, "b": 5, "c": 1}, ("c", 1))
    assert _taken(doc) == ["b"] and len(nodes_of(doc, "c/")) == 2


def test_kueue_fair_reclaim_borrowed_room_from_the_team_using_the_most(tmp_path: Path) -> None:
    doc = _three_teams(tmp_path, {"a": 3, "b": 5, "c": 1}, ("a", 1))
    assert _taken(doc) == ["b"] and len(nodes_of(doc, "a/")) == 4


def test_kueue_fair_nothing_is_taken_when_everyone_is_within_quota(tmp_path: Path) -> None:
    doc = _three_teams(tmp_path, {"a": 3, "b": 3, "c": 3}, ("c", 1))
    assert _taken(doc) == [] and len(nodes_of(doc, "c/")) == 3


def test_kueue_fair_nothing_is_taken_when_it_would_switch_the_imbalance(tmp_path: Path) -> None:
    doc = _three_teams(tmp_path, {"a": 3, "b": 5}, ("a", 2))
    assert _taken(doc) == [] and len(nodes_of(doc, "a/")) == 3 and len(nodes_of(doc, "b/")) == 5
