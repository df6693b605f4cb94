"""Teams sharing pools in `provisioner simulate`, as a platform team runs it: the console script runs the
real controllers (admission among them) over virtual time; these tests read its JSON and its errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_timeline import ROOT, cli, run_json, write
from tests.e2e.test_timeline import scenario as timeline_scenario

TEAMS_DAY = ROOT / "scenarios" / "teams-day.yaml"


# Builders ------------------------------------------------------------------------------------------------


def scenario(*, duration: str = "2h", timeline: str = "", allow_oversubscription: bool = False) -> str:
    extra = "  allowOversubscription: true\n" if allow_oversubscription else ""
    return timeline_scenario(duration=duration, timeline=timeline, extra=extra)


def l4_pool(name: str = "l4", *, limit: int | None = None, weight: int = 10) -> str:
    limits = f'  limits: {{nvidia.com/gpu: "{limit}"}}\n' if limit is not None else ""
    return f"""\
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  weight: {weight}
{limits}  template:
    spec:
      nodeClassRef: {{kind: AWSNodeClass, name: gpu}}
      requirements:
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [g6.xlarge]}}
        - {{key: provisioner.sh/capacity-type, operator: In, values: [on-demand]}}
      taints:
        - {{key: nvidia.com/gpu, effect: NoSchedule}}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5m
"""


def team(name: str, *quotas: str, department: str | None = None, default: str = "[]") -> str:
    dept = f"  department: {department}\n" if department else ""
    entries = "".join(quotas) or " []\n"
    return f"""\
---
apiVersion: provisioner.sh/v1
kind: Team
metadata: {{name: {name}}}
spec:
{dept}  namespaces: [{name}]
  defaultNodePools: {default}
  quotas:{"" if quotas else entries}
{"".join(quotas)}"""


def quota(pool: str, gpus: int, *, over: bool = True, weight: int = 1) -> str:
    return (
        f'    - {{nodePool: {pool}, resources: {{nvidia.com/gpu: "{gpus}"}}, overQuota: {str(over).lower()}, '
        f"overQuotaWeight: {weight}}}\n"
    )


def department(name: str, pool: str, gpus: int) -> str:
    return f"""\
---
apiVersion: provisioner.sh/v1
kind: Department
metadata: {{name: {name}}}
spec:
  quotas:
    - {{nodePool: {pool}, resources: {{nvidia.com/gpu: "{gpus}"}}}}
"""


def deployment(
    name: str, namespace: str, *, replicas: int, preemptible: bool = False, indent: str = ""
) -> str:
    label = ', provisioner.sh/preemptible: "true"' if preemptible else ""
    text = f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  replicas: {replicas}
  template:
    metadata:
      labels: {{app: {name}{label}}}
    spec:
      tolerations:
        - {{key: nvidia.com/gpu, operator: Exists}}
      containers:
        - name: main
          image: main:1
          resources:
            requests: {{cpu: "1", memory: 4Gi, nvidia.com/gpu: "1"}}
"""
    if not indent:
        return "---\n" + text
    lines = text.splitlines()
    return "".join(f"{indent}{'- ' if i == 0 else '  '}{line}\n" for i, line in enumerate(lines))


def nodes_of(doc: dict[str, Any], prefix: str) -> list[str]:
    return sorted(p["pod"] for p in doc["placements"] if p["pod"].startswith(prefix))


# The bundled day -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def teams_day() -> dict[str, Any]:
    return run_json(TEAMS_DAY)


def test_the_teams_day_reclaims_the_borrowed_gpus_when_their_owner_comes_back(
    teams_day: dict[str, Any],
) -> None:
    reclaimed = [e for e in teams_day["events"] if e["reason"] == "Reclaimed"]
    assert sorted(e["name"] for e in reclaimed) == ["sweep-0", "sweep-1"]
    assert all(e["at"] == "2h" and "reclaimed by team nlp on a100-train" in e["message"] for e in reclaimed)


def test_the_teams_day_reports_quota_use_and_borrowing_per_team(teams_day: dict[str, Any]) -> None:
    vision = teams_day["teams"]["vision"]["pools"]["a100-train"]
    assert vision["quota"] == {"nvidia.com/gpu": "16"}
    assert vision["allocated"]["nvidia.com/gpu"] == "24"
    assert vision["overQuota"] == {"nvidia.com/gpu": "8"}
    assert teams_day["teams"]["nlp"]["department"] == "research"


def test_the_teams_day_says_why_each_held_pod_waits(teams_day: dict[str, Any]) -> None:
    held = {u["pod"]: u["reasons"] for u in teams_day["unschedulable"]}
    assert set(held) == {"nlp/h100-try", "vision/sweep-1"}
    assert all("quota" in r["reason"] for reasons in held.values() for r in reasons)
    assert held["nlp/h100-try"][0]["reason"].startswith("can never be admitted")
    refused = next(e for e in teams_day["events"] if e["name"] == "extra")
    assert refused["reason"] == "QuotaExceeded" and "raise the quota" in refused["message"]


def test_a_gated_pod_never_gets_a_node_launched_for_it(teams_day: dict[str, Any]) -> None:
    pools = {c["nodePool"] for c in teams_day["nodeClaims"]}
    assert pools == {"a100-train"}  # nothing for h100-try, which was never admitted
    assert all(len(c["pods"]) <= 3 for c in teams_day["nodeClaims"])


# Built scenarios -------------------------------------------------------------------------------------------


def test_borrowed_capacity_is_shared_by_over_quota_weight(tmp_path: Path) -> None:
    text = (
        scenario()
        + l4_pool(limit=6)
        + team("vision", quota("l4", 0, weight=2))
        + team("nlp", quota("l4", 0, weight=1))
        + deployment("a", "vision", replicas=6, preemptible=True)
        + deployment("b", "nlp", replicas=6, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert len(nodes_of(doc, "vision/")) == 4
    assert len(nodes_of(doc, "nlp/")) == 2
    assert len(doc["nodeClaims"]) == 6


def test_a_pod_naming_no_pool_goes_to_its_teams_default_list(tmp_path: Path) -> None:
    text = (
        scenario()
        + l4_pool("first", weight=90)
        + l4_pool("second", weight=10)
        + team("vision", quota("first", 4), quota("second", 4), default="[second]")
        + deployment("a", "vision", replicas=1)
    )
    doc = run_json(write(tmp_path, text))
    assert [c["nodePool"] for c in doc["nodeClaims"]] == ["second"]


def test_over_subscription_is_refused_unless_allowed(tmp_path: Path) -> None:
    body = (
        l4_pool(limit=8)
        + department("research", "l4", 8)
        + team("vision", quota("l4", 6), department="research")
        + team("nlp", quota("l4", 6), department="research")
    )
    refused = cli("simulate", write(tmp_path, scenario() + body))
    assert refused.returncode == 1
    assert "Department/research: spec.quotas[0].resources" in refused.stderr
    assert "over-subscribed: its teams are promised 12 nvidia.com/gpu on l4" in refused.stderr
    allowed = cli("simulate", write(tmp_path, scenario(allow_oversubscription=True) + body, "allowed.yaml"))
    assert allowed.returncode == 0, allowed.stderr


def test_a_reclaim_blocked_by_a_pdb_waits_with_one_event_not_a_loop(tmp_path: Path) -> None:
    pdb = """\
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: keep, namespace: nlp}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: b}}
"""
    timeline = "    - at: 30m\n      apply:\n" + deployment("a", "vision", replicas=1, indent="        ")
    text = (
        scenario(timeline=timeline)
        + l4_pool(limit=2)
        + team("vision", quota("l4", 2))
        + team("nlp", quota("l4", 0))
        + deployment("b", "nlp", replicas=2, preemptible=True)
        + pdb
    )
    doc = run_json(write(tmp_path, text))
    blocked = [e for e in doc["events"] if e["reason"] == "ReclaimBlocked"]
    assert 1 <= len(blocked) <= 3  # once on the borrower and once on the waiting pod, not per retry
    assert "disruption budget" in blocked[0]["message"]
    assert not [e for e in doc["events"] if e["reason"] == "Reclaimed"]
    assert nodes_of(doc, "nlp/") == ["nlp/b-0", "nlp/b-1"]
    assert "vision/a-0" in {u["pod"] for u in doc["unschedulable"]}


def test_deleting_a_team_in_a_step_lets_its_waiting_pods_run(tmp_path: Path) -> None:
    timeline = "    - at: 30m\n      delete:\n        - {kind: Team, name: vision}\n"
    text = (
        scenario(timeline=timeline)
        + l4_pool()
        + team("vision", quota("l4", 0, over=False))
        + deployment("a", "vision", replicas=1)
    )
    doc = run_json(write(tmp_path, text))
    assert nodes_of(doc, "vision/") == ["vision/a-0"]
    waited = [e for e in doc["events"] if e["name"] == "a-0" and e["reason"] == "QuotaNeverFits"]
    assert waited and waited[0]["at"] == "0s"


def test_a_static_scenario_admits_team_pods_before_solving(tmp_path: Path) -> None:
    text = (
        scenario().replace("  duration: 2h\n", "")
        + l4_pool()
        + team("vision", quota("l4", 1))
        + deployment("a", "vision", replicas=2)
    )
    doc = run_json(write(tmp_path, text))
    assert [c["pods"] for c in doc["nodeClaims"]] == [["vision/a-0"]]
    (held,) = doc["unschedulable"]
    assert held["pod"] == "vision/a-1"
    assert held["reasons"][0]["reason"].startswith(
        "waiting for quota: team vision: nvidia.com/gpu on l4 1 of 1"
    )


def test_a_team_applied_by_a_step_gates_the_pods_created_after_it(tmp_path: Path) -> None:
    applied = team("vision", quota("l4", 1)).removeprefix("---\n")
    indented = "".join(
        f"        {'- ' if i == 0 else '  '}{line}\n" for i, line in enumerate(applied.splitlines())
    )
    timeline = (
        "    - at: 10m\n      apply:\n"
        + indented
        + "    - at: 20m\n      apply:\n"
        + deployment("a", "vision", replicas=2, indent="        ")
    )
    doc = run_json(write(tmp_path, scenario(timeline=timeline) + l4_pool()))
    assert nodes_of(doc, "vision/") == ["vision/a-0"]
    assert doc["teams"]["vision"]["pools"]["l4"]["allocated"]["nvidia.com/gpu"] == "1"
    assert [u["pod"] for u in doc["unschedulable"]] == ["vision/a-1"]


def test_report_teams_prints_quota_and_use_as_csv() -> None:
    result = cli("report", "teams", "-f", ROOT / "scenarios" / "teams-now.yaml", "-o", "csv")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "kind,name,department,nodepool,resource,quota,allocated,allocated_non_preemptible,over_quota,pending"
    )
    assert "Team,vision,research,a100-train,nvidia.com/gpu,16,16,16,0,16" in lines
    assert "Department,research,,a100-train,nvidia.com/gpu,32,32,32,0,16" in lines


def test_report_teams_of_a_scenario_with_a_timeline_points_to_simulate() -> None:
    result = cli("report", "teams", "-f", TEAMS_DAY)
    assert result.returncode != 0
    assert f"provisioner simulate {TEAMS_DAY}" in result.stderr


def test_a_late_borrower_gets_its_weighted_share_back_from_an_early_one(tmp_path: Path) -> None:
    timeline = "    - at: 30m\n      apply:\n" + deployment(
        "b", "nlp", replicas=4, preemptible=True, indent="        "
    )
    text = (
        scenario(timeline=timeline)
        + l4_pool(limit=4)
        + team("vision", quota("l4", 0, weight=1))
        + team("nlp", quota("l4", 0, weight=1))
        + deployment("a", "vision", replicas=4, preemptible=True)
    )
    doc = run_json(write(tmp_path, text))
    assert len(nodes_of(doc, "vision/")) == 2
    assert len(nodes_of(doc, "nlp/")) == 2
    reclaimed = [e for e in doc["events"] if e["reason"] == "Reclaimed"]
    assert len(reclaimed) == 2 and all("reclaimed by team nlp" in e["message"] for e in reclaimed)


def test_the_simulated_cluster_gates_team_pods_and_its_binder_leaves_them_alone() -> None:
    from provisioner.api import labels as wk
    from provisioner.clock import VirtualClock
    from provisioner.sim.binder import Binder
    from provisioner.sim.cluster import SimCluster
    from provisioner.state import ClusterState
    from tests.e2e.test_timeline import _node, _pod

    state = ClusterState()
    cluster = SimCluster(state, VirtualClock())
    state.upsert("Team", {"kind": "Team", "metadata": {"name": "vision"}, "spec": {"namespaces": ["vision"]}})
    cluster.create("Node", _node("roomy", cpu="16"))
    for namespace in ("vision", "default"):
        doc = _pod("p", cpu="1")
        doc["metadata"]["namespace"] = namespace
        cluster.create("Pod", doc)
    assert state.pods["vision/p"].scheduling_gates == (wk.ADMISSION_GATE,)
    assert state.pods["default/p"].scheduling_gates == ()
    assert Binder(cluster).sync() == 1
    gated = state.pods["vision/p"]
    assert gated.node_name is None and not gated.unschedulable
    assert state.pods["default/p"].node_name == "roomy"
