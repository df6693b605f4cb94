"""Kueue's preemption cases (pkg/scheduler/preemption/preemption_test.go) that fit our model, run through
`provisioner simulate`: a team is a ClusterQueue, a pool with limits its cohort. In our own words; the
expected victims are Kueue's. Cases that do not fit on purpose (README, "Where we differ from Kueue"):
ReclaimFromLowerPriority, BorrowWithinCohort and its priority threshold. LowerOrNewerEqualPriority is in
tests/unit/quota/test_within_team.py (a scenario cannot give a pod an age older than its creation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.test_quota_cases import (
    at,
    entry,
    events,
    prioritized,
    step,
    team,
)
from tests.e2e.test_teams import deployment, l4_pool, nodes_of, scenario
from tests.e2e.test_timeline import run_json, write


def sized(name: str, namespace: str, *, priority: int, gpus: int = 1, indent: str = "") -> str:
    text = prioritized(name, namespace, priority, preemptible=True, indent=indent)
    return text.replace('nvidia.com/gpu: "1"', f'nvidia.com/gpu: "{gpus}"')


def _within(
    tmp_path: Path, running: list[tuple[str, int, int]], waiting: tuple[int, int], quota: int
) -> dict[str, Any]:
    """Team x at `quota` GPUs (no borrowing) runs `running` (name, priority, gpus); at 30m a pod `new`
    (priority, gpus) arrives."""
    priority, gpus = waiting
    text = (
        scenario(timeline=at("30m", sized("new", "x", priority=priority, gpus=gpus, indent="        ")))
        + l4_pool()
        + team("x", entry("l4", quota, over=False))
        + "".join(sized(name, "x", priority=p, gpus=g) for name, p, g in running)
    )
    return run_json(write(tmp_path, text))


def victims(doc: dict[str, Any]) -> list[str]:
    return sorted(e["name"] for e in events(doc, "Preempted"))


def test_kueue_preempt_lowest_priority(tmp_path: Path) -> None:
    doc = _within(tmp_path, [("low", -1, 1), ("mid", 0, 1)], (1, 1), quota=2)
    assert victims(doc) == ["low-0"]
    assert nodes_of(doc, "x/") == ["x/mid-0", "x/new-0"]


def test_kueue_preempt_multiple(tmp_path: Path) -> None:
    doc = _within(tmp_path, [("a", -1, 1), ("b", -1, 1), ("c", 5, 1)], (1, 2), quota=3)
    assert victims(doc) == ["a-0", "b-0"]


def test_kueue_no_preemption_for_low_priority(tmp_path: Path) -> None:
    doc = _within(tmp_path, [("a", 0, 1), ("b", 0, 1)], (-1, 1), quota=2)
    assert victims(doc) == [] and "x/new-0" not in nodes_of(doc, "x/")


def test_kueue_not_enough_low_priority_workloads_evicts_nothing(tmp_path: Path) -> None:
    doc = _within(tmp_path, [("low", -1, 1), ("high", 5, 1)], (1, 2), quota=2)
    assert victims(doc) == [] and "x/new-0" not in nodes_of(doc, "x/")


def test_kueue_some_free_quota_preempts_just_the_lowest(tmp_path: Path) -> None:
    doc = _within(tmp_path, [("low", -1, 1), ("mid", 0, 1)], (1, 2), quota=3)
    assert victims(doc) == ["low-0"]


def test_kueue_no_workloads_borrowing_reclaims_nothing(tmp_path: Path) -> None:
    # The pool is full of in-quota pods: the owner's pod waits, nothing is evicted.
    text = (
        scenario(timeline=at("30m", step("a", "x", replicas=1)), allow_oversubscription=True)
        + l4_pool(limit=2)
        + team("x", entry("l4", 1))
        + team("y", entry("l4", 2))
        + deployment("b", "y", replicas=2, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert not events(doc, "Reclaimed") and nodes_of(doc, "x/") == []


def test_kueue_not_enough_workloads_borrowing_reclaims_nothing(tmp_path: Path) -> None:
    two = deployment("a", "x", replicas=1, indent="        ").replace(
        'nvidia.com/gpu: "1"', 'nvidia.com/gpu: "2"'
    )
    text = (
        scenario(timeline=at("30m", two), allow_oversubscription=True)
        + l4_pool(limit=2)
        + team("x", entry("l4", 2))
        + team("y", entry("l4", 1))
        + deployment("b", "y", replicas=2, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    # y borrows 1; x needs 2 but also lacks y's in-quota GPU (x and y are promised 3 of 2: allowed).
    assert not events(doc, "Reclaimed") and nodes_of(doc, "x/") == []


def test_kueue_reclaim_from_a_lender_stops_at_its_lending_limit(tmp_path: Path) -> None:
    # y lends at most 1 of its 3: x, which owns 1, may borrow 1 more, and no more.
    text = (
        scenario()
        + l4_pool(limit=4)
        + team("y", entry("l4", 3, extra='lendingLimit: {nvidia.com/gpu: "1"}'))
        + team("x", entry("l4", 1))
        + deployment("a", "x", replicas=4, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert len(nodes_of(doc, "x/")) == 2
