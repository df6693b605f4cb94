"""`provisioner simulate` on timeline scenarios, as a user runs it: the installed console script runs the
real controllers over virtual time, and these tests read its JSON, its HTML report and its errors."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pytest

from testkit.typed import present

ROOT = Path(__file__).resolve().parents[2]
DAY = ROOT / "scenarios" / "day.yaml"
PROVISIONER = Path(sys.executable).parent / "provisioner"


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [str(PROVISIONER)] if PROVISIONER.exists() else [sys.executable, "-m", "provisioner.cli"]
    return subprocess.run(
        [*command, *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False
    )


def run_json(path: Path, *extra: str | Path) -> dict[str, Any]:
    result = cli("simulate", path, "--output", "json", *extra)
    assert result.returncode == 0, result.stderr
    return cast(dict[str, Any], json.loads(result.stdout))


# Builders ------------------------------------------------------------------------------------------------


def scenario(*, duration: str = "3h", timeline: str = "", unavailable: str = "", extra: str = "") -> str:
    """A Scenario document; `unavailable` and `extra` are lines of its spec, as written."""
    steps = f"  timeline:\n{timeline}" if timeline else ""
    return f"""\
apiVersion: provisioner.sh/v1alpha1
kind: Scenario
metadata: {{name: t}}
spec:
  catalog: aws
  region: us-east-1
  duration: {duration}
{extra}{unavailable}{steps}"""


def gpu_pool(
    name: str = "gpu",
    *,
    types: str = "[g6.xlarge, g6.2xlarge]",
    policy: str = "WhenEmpty",
    budget: str = '"10%"',
    consolidate_after: str = "5m",
    capacity: str = "[spot, on-demand]",
) -> str:
    return f"""\
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{kind: AWSNodeClass, name: gpu}}
      requirements:
        - {{key: node.kubernetes.io/instance-type, operator: In, values: {types}}}
        - {{key: provisioner.sh/capacity-type, operator: In, values: {capacity}}}
      taints:
        - {{key: nvidia.com/gpu, effect: NoSchedule}}
  disruption:
    consolidationPolicy: {policy}
    consolidateAfter: {consolidate_after}
    budgets:
      - nodes: {budget}
"""


def workload(kind: str, name: str, *, count: int, gpus: int, cpu: str = "2", namespace: str = "ml") -> str:
    field = "parallelism" if kind == "Job" else "replicas"
    api = "batch/v1" if kind == "Job" else "apps/v1"
    return f"""\
---
apiVersion: {api}
kind: {kind}
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  {field}: {count}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      tolerations:
        - {{key: nvidia.com/gpu, operator: Exists}}
      containers:
        - name: main
          image: main:1
          resources:
            requests: {{cpu: "{cpu}", memory: 8Gi, nvidia.com/gpu: "{gpus}"}}
"""


def write(tmp_path: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def cost_before(doc: dict[str, Any], at: str) -> float:
    return cast(float, next(s["costPerHourBefore"] for s in doc["timeline"] if s["at"] == at))


# The day of scripts/demo -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    folder = tmp_path_factory.mktemp("day")
    report = folder / "scale-down.html"
    return run_json(DAY, "--report", report, "--ledger", folder / "day.sqlite"), report


def test_report_reads_the_simulated_days_ledger_and_agrees_with_simulate(
    day: tuple[dict[str, Any], Path],
) -> None:
    doc, report = day
    ledger = report.parent / "day.sqlite"
    scale_down = cli("report", "scale-down", "--ledger", ledger, "-o", "json")
    assert scale_down.returncode == 0, scale_down.stderr
    built = json.loads(scale_down.stdout)
    assert built["total"]["cost"] == pytest.approx(doc["cost"], abs=0.01), "the same total paid"
    assert built["total"]["realizedSavings"] == pytest.approx(doc["finops"]["realizedSavings"], abs=0.01)
    assert [a["node"] for a in built["actions"]] == [a["node"] for a in doc["actions"]]
    costs = cli("report", "costs", "--ledger", ledger, "-o", "json")
    assert costs.returncode == 0, costs.stderr
    assert json.loads(costs.stdout)["total"] == pytest.approx(doc["cost"], abs=0.01)
    # The meter bills each node from launch to deletion, as the run saw them.
    launched = sum(
        c["pricePerHour"]
        * (
            datetime.fromisoformat((c["deletedAt"] or doc["end"]).replace("Z", "+00:00"))
            - datetime.fromisoformat(c["launchedAt"].replace("Z", "+00:00"))
        ).total_seconds()
        / 3600
        for c in doc["nodeClaims"]
    )
    assert doc["cost"] == pytest.approx(launched, abs=0.01)


def test_the_fleet_falls_by_at_least_what_each_command_claims(day: tuple[dict[str, Any], Path]) -> None:
    doc, _ = day
    price = {c["name"]: c["pricePerHour"] for c in doc["nodeClaims"]}
    commands: dict[str, list[dict[str, Any]]] = {}
    for a in doc["actions"]:
        commands.setdefault(a["time"], []).append(a)
    assert commands
    for rows in commands.values():
        removed = sum(price[a["node"]] for a in rows)
        launched = sum(price[n] for n in {n for a in rows for n in a["replacementNodes"]})
        claimed = sum(a["savingsPerHour"] for a in rows)
        assert removed - launched >= claimed - 1e-6


@pytest.mark.parametrize(("name", "starts"), [("r.csv", "section,"), ("r.json", "{")], ids=["csv", "json"])
def test_the_report_format_follows_its_extension(tmp_path: Path, name: str, starts: str) -> None:
    text = scenario(duration="1h") + gpu_pool(types="[p4d.24xlarge]", budget='"100%"')
    path = write(tmp_path, text + workload("Job", "train", count=1, gpus=8, cpu="80"))
    result = cli("simulate", path, "--report", tmp_path / name)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / name).read_text().startswith(starts)


def test_a_report_extension_that_names_no_format_is_refused(tmp_path: Path) -> None:
    text = scenario(duration="1h") + gpu_pool(types="[p4d.24xlarge]", budget='"100%"')
    path = write(tmp_path, text + workload("Job", "train", count=1, gpus=8, cpu="80"))
    result = cli("simulate", path, "--report", tmp_path / "r.pdf")
    assert result.returncode == 2
    assert "use one of .html, .csv, .json" in result.stderr


def test_day_scales_up_falls_back_returns_to_spot_and_consolidates(day: tuple[dict[str, Any], Path]) -> None:
    doc, _ = day
    methods = {a["method"] for a in doc["actions"]}
    assert {"emptiness", "return-to-preferred", "single-node"} <= methods
    launched = {(c["nodePool"], c["capacityType"]) for c in doc["nodeClaims"]}
    # The stockout at 3h sent serving to on-demand; it is back on spot at the end.
    assert ("gpu-inference", "on-demand") in launched
    assert {n["capacityType"] for n in doc["nodes"] if n["nodePool"] == "gpu-inference"} == {"spot"}
    assert not any(n["nodePool"] == "gpu-training" for n in doc["nodes"])
    assert doc["unschedulable"] == []
    assert doc["costPerHour"] < cost_before(doc, "9h")
    # Pretraining ends at 9h: its nodes' rows account for the whole drop until the next step.
    ended = [a for a in doc["actions"] if "2026-03-02T09:00:00Z" <= a["time"] < "2026-03-02T12:00:00Z"]
    assert {a["nodePool"] for a in ended} == {"gpu-training"} and len(ended) == 2
    drop = cost_before(doc, "9h") - cost_before(doc, "12h")
    assert sum(a["savingsPerHour"] for a in ended) == pytest.approx(drop, abs=1e-4)
    said = {(e["at"], e["reason"]) for e in doc["events"]}
    assert {("3h", "Interrupted"), ("3h", "FellBack")} <= said


def test_every_action_row_matches_a_node_really_removed(day: tuple[dict[str, Any], Path]) -> None:
    doc, _ = day
    claims = {c["name"]: c for c in doc["nodeClaims"]}
    alive = {n["name"] for n in doc["nodes"]}
    assert doc["actions"]
    for action in doc["actions"]:
        node = claims[action["node"]]
        assert node["deletedAt"] is not None and action["node"] not in alive, action
        assert node["deletedAt"] >= action["time"]
        assert action["instanceType"] == node["instanceType"]
        assert action["capacityType"] == node["capacityType"]
        assert action["pricePerHour"] == pytest.approx(node["pricePerHour"])
        if action["action"] == "replace":
            assert action["replacementNodes"], action
            for name in action["replacementNodes"]:
                assert claims[name]["launchedAt"] <= action["time"]
        else:
            assert action["replacement"] is None
            assert action["savingsPerHour"] == pytest.approx(action["pricePerHour"])


def test_the_html_report_is_written_with_its_charts(day: tuple[dict[str, Any], Path]) -> None:
    doc, report = day
    html = report.read_text()
    assert html.startswith("<!DOCTYPE html>") or html.lstrip().lower().startswith("<!doctype html")
    assert html.count("<svg") >= 2
    assert "Cost per hour by pool" in html and "Saved per hour by reason" in html
    for action in doc["actions"]:
        assert action["node"] in html


def test_the_runs_report_shows_the_blockers_its_ledger_holds(day: tuple[dict[str, Any], Path]) -> None:
    # simulate reads the blocker rows back from the run's ledger only for the report, after the run.
    _, report = day
    stored = cli("report", "scale-down", "--ledger", report.parent / "day.sqlite", "-o", "json")
    assert stored.returncode == 0, stored.stderr
    top = json.loads(stored.stdout)["topBlockers"]
    assert top, "the day keeps nodes for reasons"
    html = report.read_text()
    assert "Top blockers" in html
    for blocker in top:
        assert blocker["kind"] in html and str(blocker["evaluations"]) in html


def test_the_same_scenario_gives_the_same_output(day: tuple[dict[str, Any], Path]) -> None:
    doc, _ = day
    again = cli("simulate", DAY, "--output", "json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == doc


def test_the_table_tells_the_day_with_its_actions() -> None:
    result = cli("simulate", DAY)
    assert result.returncode == 0, result.stderr
    assert "Timeline" in result.stdout and "Disruption actions" in result.stdout
    assert "return-to-preferred" in result.stdout
    assert "Traceback" not in result.stderr


def test_gcp_preemption_falls_back_in_the_node_class_zones_and_returns_to_spot() -> None:
    doc = run_json(ROOT / "scenarios" / "gcp-preemption.yaml")
    assert {c["zone"] for c in doc["nodeClaims"]} <= {"us-central1-a", "us-central1-b", "us-central1-c"}
    assert doc["completedPods"] == [f"batch/embed-{i}" for i in range(4)]
    returns = [a for a in doc["actions"] if a["method"] == "return-to-preferred"]
    assert len(returns) == 3 and all(a["time"] >= "2026-03-02T03:00:00Z" for a in returns)
    assert doc["maxDisruptingPerPool"]["l4-serving"] == 1
    assert {n["capacityType"] for n in doc["nodes"]} == {"spot"}


# Small timelines ---------------------------------------------------------------------------------------------


def test_gpu_jobs_that_end_have_their_nodes_removed_and_the_savings_add_up_to_the_drop(
    tmp_path: Path,
) -> None:
    text = scenario(
        timeline="""\
    - at: 2h
      delete:
        - {kind: Job, namespace: ml, name: train}
""",
    )
    text += gpu_pool(types="[p4d.24xlarge]", budget='"100%"')
    text += workload("Job", "train", count=2, gpus=8, cpu="80")
    doc = run_json(write(tmp_path, text))
    train_nodes = {c["name"] for c in doc["nodeClaims"] if c["nodePool"] == "gpu"}
    assert len(train_nodes) == 2
    after = [a for a in doc["actions"] if a["time"] >= "2026-03-02T02:00:00Z"]
    assert {a["node"] for a in after} == train_nodes
    assert all(a["action"] == "delete" and a["reason"] == "Empty" for a in after)
    drop = cost_before(doc, "2h") - doc["costPerHour"]
    assert drop > 0
    assert sum(a["savingsPerHour"] for a in after) == pytest.approx(drop, abs=1e-4)
    assert doc["nodes"] == []


def test_spot_coming_back_replaces_the_on_demand_fallback_within_budget(tmp_path: Path) -> None:
    text = scenario(
        unavailable="""\
  unavailable:
    - {instanceType: g6.xlarge, capacityType: spot}
    - {instanceType: g6.2xlarge, capacityType: spot}
""",
        timeline="""\
    - at: 1h
      available:
        - {instanceType: g6.xlarge, capacityType: spot}
        - {instanceType: g6.2xlarge, capacityType: spot}
""",
    )
    text += gpu_pool(budget='"1"')
    text += workload("Deployment", "chat", count=3, gpus=1)
    doc = run_json(write(tmp_path, text))
    first = [c for c in doc["nodeClaims"] if c["launchedAt"] < "2026-03-02T01:00:00Z"]
    assert len(first) == 3 and {c["capacityType"] for c in first} == {"on-demand"}
    returns = [a for a in doc["actions"] if a["method"] == "return-to-preferred"]
    assert {a["node"] for a in returns} == {c["name"] for c in first}
    for a in returns:
        assert a["action"] == "replace" and a["capacityType"] == "on-demand"
        assert a["replacementCapacityType"] == "spot" and a["savingsPerHour"] > 0
    # Budget 1: the pool never had more than one node being disrupted at once.
    assert doc["maxDisruptingPerPool"]["gpu"] == 1
    assert len({a["time"] for a in returns}) == len(returns)
    assert {n["capacityType"] for n in doc["nodes"]} == {"spot"}
    assert sorted(p["pod"] for p in doc["placements"]) == ["ml/chat-0", "ml/chat-1", "ml/chat-2"]


def test_interrupted_spot_nodes_are_replaced_and_their_pods_run_again(tmp_path: Path) -> None:
    text = scenario(
        duration="1h",
        timeline="""\
    - at: 20m
      interrupt:
        - {nodePool: gpu, capacityType: spot}
""",
    )
    text += gpu_pool()
    text += workload("Deployment", "chat", count=2, gpus=1)
    doc = run_json(write(tmp_path, text))
    before = [c for c in doc["nodeClaims"] if c["launchedAt"] < "2026-03-02T00:20:00Z"]
    assert before and all(c["deletedAt"] is not None for c in before)
    assert doc["actions"] == []  # an interruption is not a disruption decision: no ledger row
    assert len(doc["placements"]) == 2 and doc["unschedulable"] == []
    assert {p["node"] for p in doc["placements"]} <= {n["name"] for n in doc["nodes"]}


def test_applied_workloads_scale_up_at_their_step(tmp_path: Path) -> None:
    text = scenario(
        duration="2h",
        timeline="""\
    - at: 90m
      apply:
        - apiVersion: v1
          kind: Pod
          metadata: {name: probe, namespace: ml}
          spec:
            tolerations:
              - {key: nvidia.com/gpu, operator: Exists}
            containers:
              - name: main
                resources:
                  requests: {cpu: "1", nvidia.com/gpu: "1"}
""",
    )
    text += gpu_pool()
    doc = run_json(write(tmp_path, text))
    assert [c["launchedAt"] >= "2026-03-02T01:30:00Z" for c in doc["nodeClaims"]] == [True]
    assert doc["placements"] == [{"pod": "ml/probe", "node": doc["nodeClaims"][0]["name"]}]


def test_a_job_with_a_run_time_finishes_by_itself_and_its_node_goes(tmp_path: Path) -> None:
    # No steps: spec.duration alone runs the controllers over time.
    text = scenario(duration="2h") + gpu_pool(types="[p4d.24xlarge]", budget='"100%"')
    text += workload("Job", "train", count=1, gpus=8, cpu="80").replace(
        "      labels: {app: train}\n",
        "      labels: {app: train}\n      annotations: {sim.provisioner.sh/runs-for: 45m}\n",
    )
    doc = run_json(write(tmp_path, text))
    assert doc["completedPods"] == ["ml/train-0"]
    ((node, launched),) = {(c["name"], c["launchedAt"]) for c in doc["nodeClaims"]}
    (removed,) = doc["actions"]
    assert removed["node"] == node and removed["reason"] == "Empty"
    assert (
        launched < "2026-03-02T00:05:00Z"
        and "2026-03-02T00:45:00Z" < removed["time"] < "2026-03-02T01:15:00Z"
    )
    assert doc["placements"] == [] and doc["nodes"] == [] and doc["timeline"] == []
    (claim,) = doc["nodeClaims"]
    hours = (
        datetime.fromisoformat(claim["deletedAt"].replace("Z", "+00:00"))
        - datetime.fromisoformat(claim["launchedAt"].replace("Z", "+00:00"))
    ).total_seconds() / 3600
    assert 0.75 < hours < 1.25
    assert doc["cost"] == pytest.approx(claim["pricePerHour"] * hours, abs=0.01)


def test_existing_nodes_take_what_fits_and_new_capacity_comes_for_the_rest(tmp_path: Path) -> None:
    text = scenario(
        duration="2h",
        timeline="""\
    - at: 30m
      apply:
        - apiVersion: apps/v1
          kind: Deployment
          metadata: {name: api, namespace: web}
          spec:
            replicas: 2
            template:
              spec:
                containers:
                  - name: api
                    resources: {requests: {cpu: "1", memory: 1Gi}}
    - at: 1h
      apply:
        - apiVersion: v1
          kind: Pod
          metadata: {name: big, namespace: web}
          spec:
            containers:
              - name: big
                resources: {requests: {cpu: "12", memory: 8Gi}}
""",
    )
    text += """\
---
apiVersion: v1
kind: Node
metadata:
  name: old-node
  labels: {node.kubernetes.io/instance-type: m6i.2xlarge, topology.kubernetes.io/zone: us-east-1b}
---
apiVersion: v1
kind: Pod
metadata: {name: legacy, namespace: web}
spec:
  nodeName: old-node
  containers:
    - {name: legacy, resources: {requests: {cpu: "2", memory: 2Gi}}}
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: cpu}
spec:
  template:
    spec:
      nodeClassRef: {kind: AWSNodeClass, name: default}
      requirements:
        - {key: provisioner.sh/instance-family, operator: In, values: [m6i]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  template:
    spec:
      tolerations: [{operator: Exists}]
      containers:
        - {name: a, resources: {requests: {cpu: 100m, memory: 64Mi}}}
"""
    doc = run_json(write(tmp_path, text))
    placed = {p["pod"]: p["node"] for p in doc["placements"]}
    assert placed["web/legacy"] == placed["web/api-0"] == placed["web/api-1"] == "old-node"
    ((claim),) = doc["nodeClaims"]
    assert claim["launchedAt"] >= "2026-03-02T01:00:00Z"
    assert claim["pods"] == ["web/big"] and placed["web/big"] == claim["name"]  # daemon pods are not listed


PDB_NONE_MAY_GO = """\
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: small, namespace: ml}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: small}}
"""


@pytest.mark.parametrize(
    ("annotation", "pdb", "replaced"),
    [
        pytest.param("", "", True, id="consolidated"),
        pytest.param("true", "", False, id="do-not-disrupt"),
        pytest.param("", PDB_NONE_MAY_GO, False, id="pdb-allows-none"),
    ],
)
def test_a_do_not_disrupt_pod_or_a_pdb_keeps_its_underused_node(
    tmp_path: Path, annotation: str, pdb: str, replaced: bool
) -> None:
    text = scenario(
        duration="2h",
        timeline="    - at: 30m\n      delete:\n        - {kind: Job, namespace: ml, name: big}\n",
    )
    # On-demand: spot-to-spot replacement would need 15 cheaper spot types.
    text += gpu_pool(
        types="[g6.xlarge, g6.12xlarge]", policy="WhenEmptyOrUnderutilized", capacity="[on-demand]"
    )
    text += workload("Job", "big", count=1, gpus=3, cpu="8")
    small = workload("Deployment", "small", count=1, gpus=1)
    if annotation:
        small = small.replace(
            "      labels: {app: small}\n",
            f"      labels: {{app: small}}\n      annotations: {{provisioner.sh/do-not-disrupt: '{annotation}'}}\n",
        )
    doc = run_json(write(tmp_path, text + small + pdb))
    (first,) = [c for c in doc["nodeClaims"] if c["launchedAt"] < "2026-03-02T00:05:00Z"]
    assert first["instanceType"] == "g6.12xlarge" and "ml/small-0" in first["pods"]
    if replaced:
        (action,) = doc["actions"]
        assert action["node"] == first["name"] and action["replacement"] == "g6.xlarge"
        assert "ml/small-0" in action["pods"]
    else:
        assert doc["actions"] == []
        assert [n["name"] for n in doc["nodes"]] == [first["name"]]
    assert [p["pod"] for p in doc["placements"]] == ["ml/small-0"]


# Bad input -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        pytest.param(
            "    - at: 1h\n      scale: {name: chat}\n",
            "spec.timeline[0].scale: unknown field 'scale'; allowed: apply, at, available, capacity, delete, "
            "endReservations, interrupt, reservations, unavailable",
            id="unknown-step-key",
        ),
        pytest.param(
            "    - at: 90 minutes\n      delete:\n        - {kind: Deployment, namespace: ml, name: chat}\n",
            "spec.timeline[0].at: '90 minutes' is not a duration such as 30s, 15m, 1h30m or 720h",
            id="bad-at",
        ),
        pytest.param(
            "    - at: 5h\n      delete:\n        - {kind: Deployment, namespace: ml, name: chat}\n",
            "spec.timeline[0].at: at 5h is after the end of the run (spec.duration 3h)",
            id="after-the-end",
        ),
        pytest.param(
            "    - at: 1h\n      delete:\n        - {kind: Job, namespace: ml, name: nope}\n",
            "spec.timeline[0].delete[0]: Job ml/nope is not in the scenario nor applied by an earlier step",
            id="delete-unknown",
        ),
        pytest.param(
            "    - at: 1h\n      interrupt:\n        - {nodePool: missing}\n",
            "spec.timeline[0].interrupt[0].nodePool: NodePool 'missing' is not in the scenario; allowed: gpu",
            id="unknown-pool",
        ),
        pytest.param(
            "    - at: 1h\n      unavailable:\n        - {instanceType: p9.huge}\n",
            "spec.timeline[0].unavailable[0].instanceType: instance type 'p9.huge' is not in the aws catalog",
            id="unknown-type",
        ),
        pytest.param(
            "    - at: 1h\n      apply:\n        - kind: Pod\n          metadata:\n            name: p\n"
            "            annotations: {sim.provisioner.sh/runs-for: soon}\n"
            "          spec: {containers: [{name: c}]}\n",
            "spec.timeline[0].apply[0].metadata.annotations[\"sim.provisioner.sh/runs-for\"]: 'soon' is not a duration",
            id="bad-run-time",
        ),
        pytest.param(
            "    - at: 1h\n      apply:\n        - kind: Deployment\n          metadata: {name: chat, namespace: ml}\n"
            "          spec: {template: {spec: {containers: [{name: c}]}}}\n",
            "spec.timeline[0].apply[0].metadata.name: Deployment ml/chat already exists at 1h; delete it",
            id="apply-existing",
        ),
        pytest.param(
            "    - at: 1h\n      delete:\n        - {kind: Deployment, namespace: ml, name: chat}\n"
            "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: chat, namespace: ml}\n"
            "spec: {minAvailable: 1, maxUnavailable: 1, selector: {matchLabels: {app: chat}}}\n",
            "PodDisruptionBudget/chat: spec: give exactly one of spec.minAvailable and spec.maxUnavailable",
            id="pdb-both-bounds",
        ),
        pytest.param(
            "    - at: 1h\n",
            "spec.timeline[0]: a step needs at least one of apply, delete, unavailable, available, capacity, interrupt",
            id="empty-step",
        ),
        pytest.param(
            "    - at: 1h\n      apply:\n        - {kind: Service, metadata: {name: web}}\n",
            'spec.timeline[0].apply[0].kind: kind "Service" cannot be applied in a timeline',
            id="apply-unknown-kind",
        ),
    ],
)
def test_bad_timeline_input_is_located_and_exits_1(tmp_path: Path, step: str, expected: str) -> None:
    text = scenario(timeline=step) + gpu_pool() + workload("Deployment", "chat", count=1, gpus=1)
    path = write(tmp_path, text)
    result = cli("simulate", path)
    assert result.returncode == 1, result.stdout
    assert f"{path}:" in result.stderr and expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_the_report_is_the_same_whether_or_not_the_ledger_is_saved(tmp_path: Path) -> None:
    # Without --ledger the run keeps its usage rows for the report instead of writing them to its ledger.
    alone, saved = tmp_path / "alone.json", tmp_path / "saved.json"
    for args in (("--report", alone), ("--report", saved, "--ledger", tmp_path / "day.sqlite")):
        result = cli("simulate", DAY, "--output", "json", *args)
        assert result.returncode == 0, result.stderr
    report = json.loads(alone.read_text())
    assert report == json.loads(saved.read_text())
    assert report["topBlockers"] and report["total"]["cost"] > 0


def test_report_without_a_timeline_is_refused(tmp_path: Path) -> None:
    result = cli("simulate", ROOT / "scenarios" / "demo.yaml", "--report", tmp_path / "r.html")
    assert result.returncode == 1
    assert result.stderr.startswith("error: --report: needs a run with time")
    assert not (tmp_path / "r.html").exists()


# The stand-ins, in process --------------------------------------------------------------------------------


def _node(name: str, *, cpu: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(name: str, *, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
    }


def test_the_binder_fills_the_fullest_node_that_fits_and_marks_the_rest_unschedulable() -> None:
    from provisioner.clock import VirtualClock
    from provisioner.sim.binder import Binder
    from provisioner.sim.cluster import SimCluster
    from provisioner.state import ClusterState

    state = ClusterState()
    cluster = SimCluster(state, VirtualClock())
    cluster.create("Node", _node("roomy", cpu="16"))
    cluster.create("Node", _node("snug", cpu="4"))
    cluster.create("Node", _node("tainted", cpu="64", taints=[{"key": "gpu", "effect": "NoSchedule"}]))
    for name, cpu in (("a-small", "2"), ("b-medium", "8"), ("c-huge", "32")):
        cluster.create("Pod", _pod(name, cpu=cpu))
    assert Binder(cluster).sync() == 2
    pods = state.pods
    assert pods["default/a-small"].node_name == "snug"
    assert pods["default/b-medium"].node_name == "roomy"
    assert pods["default/c-huge"].node_name is None and pods["default/c-huge"].unschedulable


def test_the_binder_keeps_required_anti_affinity_and_zone_spread() -> None:
    from provisioner.clock import VirtualClock
    from provisioner.sim.binder import Binder
    from provisioner.sim.cluster import SimCluster
    from provisioner.state import ClusterState

    state = ClusterState()
    cluster = SimCluster(state, VirtualClock())
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        node = _node(name, cpu="16")
        node["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
        cluster.create("Node", node)
    for i in range(3):
        apart = _pod(f"api-{i}", cpu="1")
        apart["metadata"]["labels"] = {"app": "api"}
        apart["spec"]["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "api"}},
                    }
                ]
            }
        }
        cluster.create("Pod", apart)
    for i in range(4):
        spread = _pod(f"web-{i}", cpu="1")
        spread["metadata"]["labels"] = {"app": "web"}
        spread["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
        cluster.create("Pod", spread)
    assert Binder(cluster).sync() == 7
    api_nodes = {state.pods[f"default/api-{i}"].node_name for i in range(3)}
    assert api_nodes == {"a1", "a2", "b1"}
    zones = [
        state.nodes[present(state.pods[f"default/web-{i}"].node_name)].labels["topology.kubernetes.io/zone"]
        for i in range(4)
    ]
    assert sorted(zones) == ["a", "a", "b", "b"]


def test_workloads_recreate_evicted_pods_of_a_controller_but_not_bare_pods() -> None:
    from provisioner.clock import VirtualClock
    from provisioner.sim.cluster import SimCluster, Workloads
    from provisioner.state import ClusterState
    from provisioner.state.objects import Pod

    state = ClusterState()
    cluster = SimCluster(state, VirtualClock())
    owned = _pod("web-0", cpu="1")
    owned["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "web", "controller": True}]
    workloads = Workloads(cluster)
    workloads.add([Pod.from_dict(owned), Pod.from_dict(_pod("bare", cpu="1"))])
    cluster.evict_pod("default", "web-0")
    cluster.evict_pod("default", "bare")
    workloads.sync(VirtualClock().now())
    assert sorted(state.pods) == ["default/web-0"] and workloads.recreated == 1
    assert state.pods["default/web-0"].node_name is None


def test_counting_names_count_per_run() -> None:
    from provisioner.sim.runner import counting_names

    first, second = counting_names(), counting_names()
    assert [first(), first(), second()] == ["000001", "000002", "000001"]


def test_a_report_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path) -> None:
    result = cli("simulate", DAY, "--report", tmp_path / "missing" / "r.html")
    assert result.returncode == 2
    assert f"no directory {tmp_path / 'missing'}" in result.stderr
    assert result.stdout == ""
