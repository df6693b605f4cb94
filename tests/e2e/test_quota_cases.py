"""Quota cases translated from Kueue's scheduler and preemption tests and from Run:ai's documents, each
run through `provisioner simulate` as a platform team would (issue 22). Each case failed before its fix."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.e2e.test_teams import deployment, l4_pool, nodes_of, scenario
from tests.e2e.test_timeline import cli, run_json, write


def entry(pool: str, gpus: int, *, over: bool | None = None, extra: str = "") -> str:
    fields = [f"nodePool: {pool}", f'resources: {{nvidia.com/gpu: "{gpus}"}}']
    if over is not None:
        fields.append(f"overQuota: {str(over).lower()}")
    if extra:
        fields.append(extra)
    return f"    - {{{', '.join(fields)}}}\n"


def team(name: str, *entries: str, department: str | None = None, spec: str = "") -> str:
    dept = f"  department: {department}\n" if department else ""
    quotas = "  quotas:\n" + "".join(entries) if entries else "  quotas: []\n"
    return f"""\
---
apiVersion: provisioner.sh/v1
kind: Team
metadata: {{name: {name}}}
spec:
{dept}  namespaces: [{name}]
{spec}{quotas}"""


def department(name: str, *entries: str) -> str:
    return f"""\
---
apiVersion: provisioner.sh/v1
kind: Department
metadata: {{name: {name}}}
spec:
  quotas:
{"".join(entries)}"""


def at(time: str, *docs: str) -> str:
    return f"    - at: {time}\n      apply:\n" + "".join(docs)


def step(name: str, namespace: str, *, replicas: int, preemptible: bool = False) -> str:
    return deployment(name, namespace, replicas=replicas, preemptible=preemptible, indent="        ")


def events(doc: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    return [e for e in doc["events"] if e["reason"] == reason]


# A pod's pool order is the same for quota and the solver ---------------------------------------------------


def test_a_pod_admitted_to_its_teams_default_pool_gets_a_node_there(tmp_path: Path) -> None:
    text = (
        scenario()
        + l4_pool("default", weight=90)
        + l4_pool("a100", weight=10)
        + team("vision", entry("a100", 1), spec="  defaultNodePools: [a100]\n")
        + deployment("a", "vision", replicas=1)
    )
    doc = run_json(write(tmp_path, text))
    assert [(c["nodePool"], c["pods"]) for c in doc["nodeClaims"]] == [("a100", ["vision/a-0"])]
    assert doc["unschedulable"] == []


def test_a_teams_default_pools_win_over_the_clusters_default_gpu_list(tmp_path: Path) -> None:
    extra = "  defaultNodePools: {gpu: [l4]}\n"
    text = (
        scenario().replace("  duration: 2h\n", "  duration: 2h\n" + extra)
        + l4_pool("l4", weight=90)
        + l4_pool("a100", weight=10)
        + team("vision", entry("a100", 1), spec="  defaultNodePools: [a100]\n")
        + deployment("a", "vision", replicas=1)
    )
    doc = run_json(write(tmp_path, text))
    assert [c["nodePool"] for c in doc["nodeClaims"]] == ["a100"]
    assert doc["teams"]["vision"]["pools"]["a100"]["allocated"]["nvidia.com/gpu"] == "1"


# Take-back among borrowers inside a capped department ------------------------------------------------------


def _capped(tmp_path: Path, *, dept_over: bool) -> dict[str, Any]:
    text = (
        scenario(timeline=at("30m", step("b", "x", replicas=1, preemptible=True)))
        + l4_pool(limit=2)
        + department("d", entry("l4", 2, over=dept_over))
        + team("x", entry("l4", 0), department="d")
        + team("y", entry("l4", 0), department="d")
        + deployment("a", "y", replicas=2, preemptible=True)
    )
    return run_json(write(tmp_path, text))


def test_a_borrower_takes_its_share_back_inside_a_department_that_may_not_borrow(tmp_path: Path) -> None:
    doc = _capped(tmp_path, dept_over=False)
    assert nodes_of(doc, "x/") == ["x/b-0"]
    assert len(nodes_of(doc, "y/")) == 1
    (reclaimed,) = events(doc, "Reclaimed")
    assert "reclaimed by team x" in reclaimed["message"]


def test_a_borrower_takes_its_share_back_inside_a_department_that_may_borrow(tmp_path: Path) -> None:
    doc = _capped(tmp_path, dept_over=True)
    assert nodes_of(doc, "x/") == ["x/b-0"]
    assert len(nodes_of(doc, "y/")) == 1


# Reclaim takes just enough, and the owner's pods take the freed place --------------------------------------

A100 = """\
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: a100}
spec:
  limits: {nvidia.com/gpu: "64"}
  template:
    spec:
      nodeClassRef: {kind: AWSNodeClass, name: gpu}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [p4d.24xlarge]}
        - {key: provisioner.sh/capacity-type, operator: In, values: [on-demand]}
      taints:
        - {key: nvidia.com/gpu, effect: NoSchedule}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 10m}
"""


def eights(name: str, namespace: str, replicas: int, *, preemptible: bool = False, indent: str = "") -> str:
    """A deployment of 8-GPU pods (a p4d.24xlarge each)."""
    return deployment(name, namespace, replicas=replicas, preemptible=preemptible, indent=indent).replace(
        '{cpu: "1", memory: 4Gi, nvidia.com/gpu: "1"}', '{cpu: "80", memory: 900Gi, nvidia.com/gpu: "8"}'
    )


def test_a_reclaim_evicts_just_what_the_owner_needs_and_the_owner_keeps_it(tmp_path: Path) -> None:
    # Four teams share 64 GPUs; department research (vision, nlp) may borrow beyond its 32. vision runs
    # 16 in quota and borrows 24; speech runs its 16. nlp's two 8-GPU pods need 16: 8 are idle, so one
    # borrowed pod is evicted, and no borrower comes back into the room nlp took.
    text = (
        scenario(timeline=at("1h", eights("ft", "nlp", 2, indent="        ")))
        + A100
        + department("research", entry("a100", 32, over=True))
        + team("vision", entry("a100", 16), department="research")
        + team("nlp", entry("a100", 16), department="research")
        + team("speech", entry("a100", 16))
        + team("data", entry("a100", 16))
        + eights("train", "vision", 2)
        + eights("sweep", "vision", 3, preemptible=True)
        + eights("train", "speech", 2)
    )
    doc = run_json(write(tmp_path, text))
    assert len(events(doc, "Reclaimed")) == 1
    assert nodes_of(doc, "nlp/") == ["nlp/ft-0", "nlp/ft-1"]
    gpus = {name: t["pools"]["a100"]["allocated"].get("nvidia.com/gpu") for name, t in doc["teams"].items()}
    assert gpus == {"vision": "32", "nlp": "16", "speech": "16", "data": None}


# Priority within a team -------------------------------------------------------------------------------------


def prioritized(name: str, namespace: str, priority: int, *, preemptible: bool, indent: str = "") -> str:
    text = deployment(name, namespace, replicas=1, preemptible=preemptible, indent=indent)
    return re.sub(r"^( *)tolerations:", rf"\1priority: {priority}\n\1tolerations:", text, flags=re.M)


def _priority_case(
    tmp_path: Path, *, low_preemptible: bool, high_preemptible: bool, spec: str = ""
) -> dict[str, Any]:
    text = (
        scenario(
            timeline=at("30m", prioritized("high", "x", 1, preemptible=high_preemptible, indent="        "))
        )
        + l4_pool()
        + team("x", entry("l4", 1, over=False), spec=spec)
        + prioritized("low", "x", -1, preemptible=low_preemptible)
    )
    return run_json(write(tmp_path, text))


def test_a_higher_priority_pod_preempts_its_teams_lower_priority_pod_at_quota(tmp_path: Path) -> None:
    doc = _priority_case(tmp_path, low_preemptible=True, high_preemptible=False)
    assert nodes_of(doc, "x/") == ["x/high-0"]
    (preempted,) = events(doc, "Preempted")
    assert preempted["name"] == "low-0" and "preempted within team x" in preempted["message"]


def test_a_team_that_opts_out_of_preemption_keeps_its_running_pod(tmp_path: Path) -> None:
    spec = "  preemption: {withinTeam: Never}\n"
    doc = _priority_case(tmp_path, low_preemptible=True, high_preemptible=False, spec=spec)
    assert nodes_of(doc, "x/") == ["x/low-0"]
    assert not events(doc, "Preempted")


def test_a_preemptible_pod_never_evicts_a_pod_that_is_not_preemptible(tmp_path: Path) -> None:
    doc = _priority_case(tmp_path, low_preemptible=False, high_preemptible=True)
    assert nodes_of(doc, "x/") == ["x/low-0"]
    assert not events(doc, "Preempted")


# A department owns its quota -------------------------------------------------------------------------------


def _owned(tmp_path: Path, lender: str) -> dict[str, Any]:
    text = (
        scenario(timeline=at("30m", step("b", "x", replicas=2, preemptible=True)))
        + l4_pool(limit=2)
        + department("d", entry("l4", 2))
        + department("e", entry("l4", 0))
        + team("x", entry("l4", 0), department="d")
        + lender
        + deployment("a", "z", replicas=2, preemptible=True)
    )
    return run_json(write(tmp_path, text))


def test_a_departments_quota_is_reclaimed_from_a_team_of_no_department(tmp_path: Path) -> None:
    doc = _owned(tmp_path, team("z", entry("l4", 0)))
    assert nodes_of(doc, "x/") == ["x/b-0", "x/b-1"]
    assert nodes_of(doc, "z/") == []
    assert len(events(doc, "Reclaimed")) == 2


def test_a_departments_quota_is_reclaimed_from_another_department(tmp_path: Path) -> None:
    doc = _owned(tmp_path, team("z", entry("l4", 0), department="e"))
    assert nodes_of(doc, "x/") == ["x/b-0", "x/b-1"]
    assert nodes_of(doc, "z/") == []


def test_beyond_what_its_department_owns_a_team_shares_by_weight(tmp_path: Path) -> None:
    # d owns 1 of the 2: x gets it back, then shares the other fairly with z (one each at most).
    text = (
        scenario(timeline=at("30m", step("b", "x", replicas=2, preemptible=True)))
        + l4_pool(limit=3)
        + department("d", entry("l4", 1))
        + team("x", entry("l4", 0), department="d")
        + team("z", entry("l4", 0))
        + deployment("a", "z", replicas=3, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert nodes_of(doc, "x/") == ["x/b-0", "x/b-1"]
    assert len(nodes_of(doc, "z/")) == 1


# Numeric borrowing and lending limits (Kueue's borrowingLimit and lendingLimit) ----------------------------


def test_a_team_borrows_at_most_its_borrowing_limit(tmp_path: Path) -> None:
    text = (
        scenario()
        + l4_pool(limit=6)
        + team("x", entry("l4", 1, over=True, extra='borrowingLimit: {nvidia.com/gpu: "2"}'))
        + deployment("a", "x", replicas=5, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert len(nodes_of(doc, "x/")) == 3
    held = {u["pod"]: u["reasons"][0]["reason"] for u in doc["unschedulable"]}
    assert len(held) == 2 and all("borrowingLimit" in why for why in held.values())


def test_a_department_borrows_at_most_its_borrowing_limit(tmp_path: Path) -> None:
    text = (
        scenario()
        + l4_pool(limit=6)
        + department("d", entry("l4", 1, over=True, extra='borrowingLimit: {nvidia.com/gpu: "1"}'))
        + team("x", entry("l4", 1), department="d")
        + deployment("a", "x", replicas=4, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert len(nodes_of(doc, "x/")) == 2


def test_a_team_lends_at_most_its_lending_limit(tmp_path: Path) -> None:
    text = (
        scenario()
        + l4_pool(limit=4)
        + team("y", entry("l4", 4, extra='lendingLimit: {nvidia.com/gpu: "1"}'))
        + team("x", entry("l4", 0))
        + deployment("a", "x", replicas=4, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert len(nodes_of(doc, "x/")) == 1
    held = [u["reasons"][0]["reason"] for u in doc["unschedulable"]]
    assert len(held) == 3 and "kept by its lenders (lendingLimit)" in held[0]


def test_what_a_lender_keeps_is_there_for_its_own_pods_at_once(tmp_path: Path) -> None:
    text = (
        scenario(timeline=at("30m", step("b", "y", replicas=3)))
        + l4_pool(limit=4)
        + team("y", entry("l4", 4, extra='lendingLimit: {nvidia.com/gpu: "1"}'))
        + team("x", entry("l4", 0))
        + deployment("a", "x", replicas=4, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert nodes_of(doc, "y/") == ["y/b-0", "y/b-1", "y/b-2"]
    assert not events(doc, "Reclaimed")


def test_over_quota_false_still_means_no_borrowing(tmp_path: Path) -> None:
    text = (
        scenario()
        + l4_pool(limit=6)
        + team("x", entry("l4", 1, over=False))
        + deployment("a", "x", replicas=3, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert len(nodes_of(doc, "x/")) == 1


def test_a_borrowing_limit_with_over_quota_false_is_refused(tmp_path: Path) -> None:
    text = (
        scenario()
        + l4_pool()
        + team("x", entry("l4", 1, over=False, extra='borrowingLimit: {nvidia.com/gpu: "2"}'))
    )
    result = cli("simulate", write(tmp_path, text))
    assert result.returncode == 1
    assert "Team/x: spec.quotas[0].borrowingLimit" in result.stderr
    assert "needs overQuota: true" in result.stderr


def test_a_lending_limit_above_the_quota_is_refused(tmp_path: Path) -> None:
    text = scenario() + l4_pool() + team("x", entry("l4", 1, extra='lendingLimit: {nvidia.com/gpu: "2"}'))
    result = cli("simulate", write(tmp_path, text))
    assert result.returncode == 1
    assert 'spec.quotas[0].lendingLimit["nvidia.com/gpu"]: 2 is more than the quota 1' in result.stderr


def test_room_a_half_done_reclaim_freed_is_held_for_its_pod_not_lent_again(tmp_path: Path) -> None:
    # vision's 2-GPU pod needs both of nlp's borrowed GPUs; a PDB lets only one go. The GPU freed stays
    # held for vision (nlp's replacement pod is not admitted into it) until the hold times out.
    pdb = """\
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: keep, namespace: nlp}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: b}}
"""
    two = deployment("a", "vision", replicas=1, indent="        ").replace(
        'nvidia.com/gpu: "1"', 'nvidia.com/gpu: "2"'
    )
    text = (
        scenario(duration="40m", timeline=at("5m", two))
        + l4_pool(limit=2)
        + team("vision", entry("l4", 2))
        + team("nlp", entry("l4", 0))
        + deployment("b", "nlp", replicas=2, preemptible=True)
        + pdb
    )
    doc = run_json(write(tmp_path, text))
    timeline = [(e["at"], e["name"], e["reason"]) for e in doc["events"] if e["name"] in ("a-0", "b-0")]
    first = timeline.index(("5m", "b-0", "Reclaimed"))
    timed_out = timeline.index(("15m", "a-0", "ReclaimTimedOut"))
    # While held, nlp's replacement pod b-0 only waits; once the hold is let go it runs (and is a victim
    # of vision's next try: evicting it is what the budget blocks then).
    assert {reason for _, name, reason in timeline[first + 1 : timed_out] if name == "b-0"} == {
        "QuotaExceeded"
    }
    assert ("16m", "b-0", "ReclaimBlocked") in timeline[timed_out:]


# What simulate and the reports say ---------------------------------------------------------------------------


def test_events_of_namespaced_objects_carry_their_namespace(tmp_path: Path) -> None:
    text = (
        scenario(timeline=at("30m", step("b", "x", replicas=1, preemptible=True)))
        + l4_pool(limit=1)
        + team("x", entry("l4", 1))
        + team("y", entry("l4", 0))
        + deployment("b", "y", replicas=1, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    (reclaimed,) = events(doc, "Reclaimed")
    assert (reclaimed["namespace"], reclaimed["name"]) == ("y", "b-0")
    assert all("namespace" not in e for e in doc["events"] if e["kind"] in ("NodeClaim", "NodePool", "Node"))


def test_report_teams_counts_as_allocated_only_pods_the_run_gives_a_node(tmp_path: Path) -> None:
    # Quota admits both pods, but no l4 node has 64 CPUs: the big one never gets a node.
    big = deployment("big", "x", replicas=1).replace('cpu: "1"', 'cpu: "64"')
    text = (
        scenario().replace("  duration: 2h\n", "")
        + l4_pool()
        + team("x", entry("l4", 2))
        + deployment("a", "x", replicas=1)
        + big
    )
    result = cli("report", "teams", "-f", write(tmp_path, text), "-o", "csv")
    assert result.returncode == 0, result.stderr
    assert "Team,x,,l4,nvidia.com/gpu,2,1,1,0,1" in result.stdout.splitlines()


PRIORITY_CLASSES = """\
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: batch}
value: -1
globalDefault: true
"""


def named_class(text: str, name: str) -> str:
    return re.sub(r"^( *)tolerations:", rf"\1priorityClassName: {name}\n\1tolerations:", text, flags=re.M)


def test_priority_classes_in_a_scenario_give_pods_their_priority(tmp_path: Path) -> None:
    # The class's value decides, as the API server's Priority admission sets it: urgent preempts the
    # team's pod of the default class (batch, -1).
    urgent = named_class(deployment("high", "x", replicas=1, indent="        "), "urgent")
    text = (
        scenario(timeline=at("30m", urgent))
        + l4_pool()
        + team("x", entry("l4", 1, over=False))
        + deployment("low", "x", replicas=1, preemptible=True)
        + PRIORITY_CLASSES
    )
    doc = run_json(write(tmp_path, text))
    assert nodes_of(doc, "x/") == ["x/high-0"]
    (preempted,) = events(doc, "Preempted")
    assert "priority 1000, this pod -1" in preempted["message"]


def test_a_pod_naming_a_priority_class_no_document_defines_is_refused(tmp_path: Path) -> None:
    text = scenario() + l4_pool() + named_class(deployment("a", "x", replicas=1), "urgnt") + PRIORITY_CLASSES
    result = cli("simulate", write(tmp_path, text))
    assert result.returncode == 1
    assert (
        "spec.template.spec.priorityClassName: priorityClassName 'urgnt': no PriorityClass" in result.stderr
    )
    assert "known: batch, system-cluster-critical, system-node-critical, urgent" in result.stderr


def _own_borrowers(tmp_path: Path, limit: int) -> dict[str, Any]:
    text = (
        scenario(timeline=at("30m", step("guaranteed", "x", replicas=1)))
        + l4_pool(limit=limit)
        + team("x", entry("l4", 2))
        + deployment("sweep", "x", replicas=2, preemptible=True)
    )
    return run_json(write(tmp_path, text))


def test_a_pod_within_quota_leaves_its_teams_sweeps_running_when_the_pool_has_room(tmp_path: Path) -> None:
    doc = _own_borrowers(tmp_path, limit=4)
    assert nodes_of(doc, "x/") == ["x/guaranteed-0", "x/sweep-0", "x/sweep-1"]
    assert not events(doc, "Preempted")
    assert doc["teams"]["x"]["pools"]["l4"]["overQuota"] == {"nvidia.com/gpu": "1"}


def test_a_pod_within_quota_evicts_one_of_its_teams_sweeps_when_the_pool_is_full(tmp_path: Path) -> None:
    doc = _own_borrowers(tmp_path, limit=2)
    assert len(events(doc, "Preempted")) == 1
    assert "x/guaranteed-0" in nodes_of(doc, "x/") and len(nodes_of(doc, "x/")) == 2
