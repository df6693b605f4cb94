"""Admission of team pods through the scheduling gate, over the in-memory cluster and over the Kubernetes
API (the same tests): pinning and lifting the gate, reasons that stay, reclaim through the Eviction API,
and Team status."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provisioner.api import labels as wk
from provisioner.controllers.admission import CONDITION
from testkit.builders.pods import pdb_manifest
from testkit.controllers.world import World, gpu_pod, node_class, node_pool
from testkit.typed import present


def team(name: str, gpus: int, *, over: bool = True, department: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaces": [name],
        "quotas": [{"nodePool": "gpu", "resources": {wk.GPU_RESOURCE: str(gpus)}, "overQuota": over}],
    }
    if department is not None:
        spec["department"] = department
    return {"apiVersion": "provisioner.sh/v1", "kind": "Team", "metadata": {"name": name}, "spec": spec}


def department(name: str, gpus: int, *, over: bool = True) -> dict[str, Any]:
    quota = {"nodePool": "gpu", "resources": {wk.GPU_RESOURCE: str(gpus)}, "overQuota": over}
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "Department",
        "metadata": {"name": name},
        "spec": {"quotas": [quota]},
    }


def gated(
    name: str, namespace: str, *, preemptible: bool = False, gpus: int = 1, priority: int | None = None
) -> dict[str, Any]:
    """A team's pod as the webhook lets it into the API server: behind the admission gate."""
    labels = {"app": name, **({wk.PREEMPTIBLE: "true"} if preemptible else {})}
    doc = gpu_pod(name, gpus=gpus, namespace=namespace, labels=labels)
    doc["spec"]["schedulingGates"] = [{"name": wk.ADMISSION_GATE}]
    if priority is not None:
        doc["spec"]["priority"] = priority
    return doc


def condition(w: Any, key: str) -> dict[str, Any] | None:
    pod = w.state.pods[key]
    return next(
        (c for c in pod.raw.get("status", {}).get("conditions") or () if c.get("type") == CONDITION), None
    )


def test_a_pod_within_quota_is_pinned_to_its_pool_ungated_and_given_a_node(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu"), team("vision", 2), gated("a", "vision"))
    w.run_until(w.all_bound, max_ticks=90)
    pod = w.state.pods["vision/a"]
    assert pod.scheduling_gates == ()
    assert pod.node_selector[wk.NODEPOOL] == "gpu"
    assert [c.nodepool for c in w.claims()] == ["gpu"]
    found = condition(w, "vision/a")
    assert (
        found is not None and found["status"] == "True" and "within quota of team vision" in found["message"]
    )
    assert any(e["involvedObject"]["name"] == "a" for e in w.events("Admitted"))


def test_a_pod_beyond_quota_stays_gated_says_why_once_and_launches_nothing(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu"), team("vision", 1), gated("big", "vision", gpus=2))
    for _ in range(5):
        w.tick()
    pod = w.state.pods["vision/big"]
    assert pod.gated and not pod.node_name
    assert w.claims() == []
    found = condition(w, "vision/big")
    assert found is not None and found["status"] == "False" and found["reason"] == "QuotaNeverFits"
    assert "team vision: nvidia.com/gpu on gpu 0 of 1 in use, the pod asks 2" in found["message"]
    said = [e for e in w.events() if e["involvedObject"]["name"] == "big"]
    assert [e["reason"] for e in said] == ["QuotaNeverFits"]


def test_an_owner_reclaims_a_borrowed_gpu_through_the_eviction_api(make_world: Callable[..., World]) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu", limits={wk.GPU_RESOURCE: "1"}), team("vision", 1), team("nlp", 0))
    w.apply(gated("borrower", "nlp", preemptible=True))
    w.run_until(w.all_bound, max_ticks=90)
    assert present(condition(w, "nlp/borrower"))["reason"] == "AdmittedOverQuota"
    w.apply(gated("owner", "vision"))
    w.run_until(lambda: "nlp/borrower" not in w.state.pods, max_ticks=10)
    (event,) = w.events("Reclaimed")
    assert event["involvedObject"]["name"] == "borrower"
    assert "reclaimed by team vision on gpu: frees" in event["message"]
    w.run_until(lambda: bool(w.state.pods["vision/owner"].node_name), max_ticks=30)


def test_team_status_shows_quota_and_use_per_pool(make_world: Callable[..., World]) -> None:
    w = make_world()
    w.apply(
        node_class(), node_pool("gpu"), team("vision", 2), gated("a", "vision"), gated("b", "vision", gpus=2)
    )
    w.run_until(lambda: bool(w.state.pods["vision/a"].node_name), max_ticks=90)
    w.tick()
    status = w.state.teams["vision"].status
    assert status is not None and status.waiting == 1
    (pool,) = status.pools
    assert (pool.node_pool, pool.quota[wk.GPU_RESOURCE], pool.allocated[wk.GPU_RESOURCE]) == ("gpu", "2", "1")
    assert pool.pending[wk.GPU_RESOURCE] == "2"


def test_metrics_count_waiting_admitted_and_reclaimed_pods(make_world: Callable[..., World]) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu", limits={wk.GPU_RESOURCE: "1"}), team("vision", 1), team("nlp", 0))
    w.apply(gated("borrower", "nlp", preemptible=True), gated("never", "nlp"))
    w.run_until(lambda: bool(w.state.pods["nlp/borrower"].node_name), max_ticks=90)
    assert w.metric("provisioner_pods_admitted_total", team="nlp", how="over-quota") == 1
    assert w.metric("provisioner_pods_waiting_for_quota", team="nlp") == 1
    w.apply(gated("owner", "vision"))
    w.run_until(lambda: "nlp/borrower" not in w.state.pods, max_ticks=10)
    assert w.metric("provisioner_reclaims_total", result="evicted") == 1


def test_room_a_half_done_reclaim_freed_waits_for_its_pod_then_times_out_with_an_event(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu", limits={wk.GPU_RESOURCE: "2"}), team("vision", 2), team("nlp", 0))
    w.apply(
        gated("b1", "nlp", preemptible=True),
        gated("b2", "nlp", preemptible=True),
        pdb_manifest("keep", match={wk.PREEMPTIBLE: "true"}, namespace="nlp", min_available=1),
    )
    w.run_until(w.all_bound, max_ticks=90)
    w.apply(gated("owner", "vision", gpus=2))
    w.run_until(lambda: len(w.events("Reclaimed")) == 1, max_ticks=10)
    # One borrower is gone, the budget keeps the other: a new borrower does not get the freed GPU.
    w.apply(gated("again", "nlp", preemptible=True))
    for _ in range(20):  # passes inside and outside the blocked borrower's back-off
        w.tick(15)
    assert w.state.pods["nlp/again"].gated
    assert w.state.pods["vision/owner"].gated
    assert not w.events("ReclaimTimedOut")
    w.run_until(lambda: bool(w.events("ReclaimTimedOut")), max_ticks=10, seconds=60)
    (timed_out,) = w.events("ReclaimTimedOut")
    assert timed_out["involvedObject"]["name"] == "owner" and "held 600s" in timed_out["message"]
    w.run_until(lambda: not w.state.pods["nlp/again"].gated, max_ticks=5)


def test_a_higher_priority_pod_preempts_its_teams_lower_priority_pod_through_the_eviction_api(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu"), team("vision", 1, over=False))
    w.apply(gated("low", "vision", preemptible=True, priority=-1))
    w.run_until(w.all_bound, max_ticks=90)
    w.apply(gated("high", "vision", priority=1))
    w.run_until(lambda: "vision/low" not in w.state.pods, max_ticks=10)
    (event,) = w.events("Preempted")
    assert event["involvedObject"]["name"] == "low"
    assert "preempted within team vision on gpu" in event["message"]
    w.run_until(lambda: bool(w.state.pods["vision/high"].node_name), max_ticks=60)


def test_a_departments_quota_is_reclaimed_for_its_team_from_a_team_of_no_department(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.apply(
        node_class(),
        node_pool("gpu", limits={wk.GPU_RESOURCE: "2"}),
        department("research", 2),
        team("vision", 0, department="research"),
        team("guest", 0),
    )
    w.apply(gated("g1", "guest", preemptible=True), gated("g2", "guest", preemptible=True))
    w.run_until(w.all_bound, max_ticks=90)
    w.apply(gated("v1", "vision", preemptible=True), gated("v2", "vision", preemptible=True))
    w.run_until(lambda: not any(k.startswith("guest/") for k in w.state.pods), max_ticks=20)
    assert sorted(e["involvedObject"]["name"] for e in w.events("Reclaimed")) == ["g1", "g2"]
    w.run_until(lambda: all(w.state.pods[f"vision/v{i}"].node_name for i in (1, 2)), max_ticks=60)


def test_a_borrower_takes_its_share_back_from_a_sibling_inside_a_capped_department(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.apply(
        node_class(),
        node_pool("gpu", limits={wk.GPU_RESOURCE: "2"}),
        department("research", 2, over=False),
        team("x", 0, department="research"),
        team("y", 0, department="research"),
    )
    w.apply(gated("y1", "y", preemptible=True), gated("y2", "y", preemptible=True))
    w.run_until(w.all_bound, max_ticks=90)
    w.apply(gated("x1", "x", preemptible=True))
    w.run_until(lambda: len(w.events("Reclaimed")) == 1, max_ticks=20)
    w.run_until(lambda: bool(w.state.pods["x/x1"].node_name), max_ticks=60)
    # The reclaimed pod is gone once its termination ends (on a real cluster, a tick or more after
    # the eviction); the other stays.
    w.run_until(lambda: len([k for k in w.state.pods if k.startswith("y/")]) == 1, max_ticks=30)
    assert len([p for p in w.pods() if p.key.startswith("y/") and p.node_name]) == 1
