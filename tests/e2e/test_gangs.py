"""Gangs through `provisioner simulate`, as a user runs it: a 4 x 8-GPU Kueue pod group in a shortage
launches nothing and says why, then launches whole in one zone when capacity returns (scenarios/
gang-shortage.yaml); the static solve shows each gang and what all-or-nothing avoided; a bad `capacity`
entry is refused with its file, line and field."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.e2e.test_timeline import ROOT, cli, run_json

SHORTAGE = ROOT / "scenarios" / "gang-shortage.yaml"


def _static(tmp_path: Path, capacity: str) -> Path:
    """gang-shortage.yaml without its timeline (one solve), with `capacity` as its spec.capacity."""
    docs = list(yaml.safe_load_all(SHORTAGE.read_text()))
    scenario = docs[0]
    pods = scenario["spec"].pop("timeline")[0]["apply"]
    scenario["spec"].pop("duration")
    scenario["spec"]["capacity"] = yaml.safe_load(capacity)
    path = tmp_path / "gang.yaml"
    path.write_text(yaml.safe_dump_all([scenario, *docs[1:], *pods]))
    return path


def test_the_shortage_scenario_launches_nothing_until_capacity_returns_then_all_four_in_one_zone() -> None:
    doc = run_json(SHORTAGE)
    launched = doc["nodeClaims"]
    assert len(launched) == 4, "the gang's 4 nodes, and never a partial group"
    assert {c["zone"] for c in launched} == {"us-east-1b"}
    assert all(c["launchedAt"] >= "2026-03-02T02:00:00Z" for c in launched), (
        "nothing before capacity returned"
    )
    [gang] = doc["gangs"]
    assert (gang["state"], gang["running"], gang["zone"]) == ("Running", 4, "us-east-1b")
    assert gang["placement"], "the NodeClass asks for a placement group per gang, and all 4 are in it"
    said = [e for e in doc["events"] if e["kind"] == "Pod" and e["reason"] == "FailedProvisioning"]
    assert {e["name"] for e in said} == {f"llama-70b-{i}" for i in range(4)}
    assert all("gang ml/llama-70b needs all 4 pods placed together" in e["message"] for e in said)
    # Paid only from the group's launch: 4 x $55.04/h for the last 2 hours, not 3 nodes idling from 0s.
    assert doc["cost"] < 4 * 55.04 * 2.01
    # What all-or-nothing avoided: 3 nodes ($165.12/h) a one-at-a-time launch would have billed for 2 h.
    avoided = gang["avoided"]
    assert (avoided["nodes"], avoided["perHour"]) == (3, round(3 * 55.04, 6))
    assert 2.0 <= avoided["hours"] <= 2.02
    assert doc["finops"]["gangAvoidedCost"] == avoided["cost"]


def test_a_static_shortage_shows_the_gang_unschedulable_how_many_fit_and_what_it_avoided(
    tmp_path: Path,
) -> None:
    path = _static(
        tmp_path,
        "[{instanceType: p5.48xlarge, capacityType: on-demand, count: 0},"
        " {instanceType: p5.48xlarge, zone: us-east-1a, capacityType: on-demand, count: 3}]",
    )
    doc = run_json(path)
    assert doc["nodeClaims"] == []
    [gang] = doc["gangs"]
    assert (gang["state"], gang["fitting"], gang["zone"]) == ("Unschedulable", 3, "us-east-1a")
    assert gang["avoidedPerHour"] == round(3 * 55.04, 6)
    for u in doc["unschedulable"]:
        [reason] = u["reasons"]
        assert reason["nodePool"] == "h100-training"
        assert "3 of 4 fit in us-east-1a" in reason["reason"]
        assert "has 3 left, 4 needed" in reason["reason"]
    table = cli("simulate", path)
    assert table.returncode == 0, table.stderr
    assert "Gangs: 1" in table.stdout and "Unschedulable" in table.stdout


def test_a_static_gang_with_room_gets_four_nodes_in_one_zone(tmp_path: Path) -> None:
    path = _static(
        tmp_path, "[{instanceType: p5.48xlarge, zone: us-east-1a, capacityType: on-demand, count: 3}]"
    )
    doc = run_json(path)
    zones = {c["zone"] for c in doc["nodeClaims"]}
    assert len(doc["nodeClaims"]) == 4 and len(zones) == 1 and zones != {"us-east-1a"}
    assert doc["gangs"][0]["state"] == "Placed"


def test_a_capacity_entry_naming_an_unknown_type_is_refused_with_its_field(tmp_path: Path) -> None:
    path = _static(tmp_path, "[{instanceType: p9.huge, count: 1}]")
    result = cli("simulate", path)
    assert result.returncode == 1
    assert "spec.capacity[0].instanceType" in result.stderr
    assert "p9.huge" in result.stderr


REQUEST = """\
apiVersion: v1
kind: PodTemplate
metadata: {name: worker, namespace: ml}
template:
  spec:
    nodeSelector: {provisioner.sh/gpu-name: h100}
    tolerations:
      - {key: nvidia.com/gpu, operator: Exists}
    containers:
      - name: trainer
        image: trainer:1
        resources:
          requests: {cpu: "150", memory: 1500Gi, nvidia.com/gpu: "8"}
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: llama-70b, namespace: ml}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets:
    - podTemplateRef: {name: worker}
      count: 4
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: probe, namespace: ml}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets:
    - podTemplateRef: {name: worker}
      count: 1
"""


def _pool_documents() -> str:
    docs = list(yaml.safe_load_all(SHORTAGE.read_text()))
    return yaml.safe_dump_all(docs[1:])


def test_provisioning_requests_in_a_static_solve_say_what_they_would_get(tmp_path: Path) -> None:
    path = tmp_path / "requests.yaml"
    path.write_text(_pool_documents() + "---\n" + REQUEST)
    doc = run_json(path)
    assert len(doc["nodeClaims"]) == 4 and len({c["zone"] for c in doc["nodeClaims"]}) == 1
    assert doc["unschedulable"] == [], "a request's pods are not pods of the cluster"
    by_name = {r["name"]: r for r in doc["provisioningRequests"]}
    assert (by_name["ml/llama-70b"]["state"], by_name["ml/llama-70b"]["reason"]) == (
        "Provisioned",
        "Provisioned",
    )
    assert (by_name["ml/probe"]["state"], by_name["ml/probe"]["reason"]) == (
        "NotProvisioned",
        "CapacityIsNotFound",
    )
    assert doc["gangs"][0]["name"] == "ml/provisioningrequest.llama-70b"


def test_an_atomic_request_in_a_timeline_waits_for_capacity_then_is_provisioned_in_one_zone(
    tmp_path: Path,
) -> None:
    scenario = {
        "apiVersion": "provisioner.sh/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "requests"},
        "spec": {
            "catalog": "aws",
            "duration": "1h",
            "capacity": [{"instanceType": "p5.48xlarge", "capacityType": "on-demand", "count": 3}],
            "timeline": [
                {
                    "at": "20m",
                    "capacity": [
                        {
                            "instanceType": "p5.48xlarge",
                            "zone": "us-east-1c",
                            "capacityType": "on-demand",
                            "count": 4,
                        }
                    ],
                }
            ],
        },
    }
    path = tmp_path / "requests.yaml"
    path.write_text(yaml.safe_dump(scenario) + "---\n" + _pool_documents() + "---\n" + REQUEST)
    doc = run_json(path)
    launched = doc["nodeClaims"]
    assert len(launched) == 4 and {c["zone"] for c in launched} == {"us-east-1c"}
    assert all(c["launchedAt"] >= "2026-03-02T00:20:00Z" for c in launched)
    [request] = [r for r in doc["provisioningRequests"] if r["name"] == "ml/llama-70b"]
    conditions = {c["type"]: c for c in request["conditions"]}
    assert conditions["Accepted"]["status"] == "True"
    assert conditions["Provisioned"]["status"] == "True"
    assert "us-east-1c" in conditions["Provisioned"]["message"]
    assert conditions["BookingExpired"]["status"] == "True", "no real pod came to take the capacity"


def test_a_request_of_a_class_we_do_not_serve_is_refused_with_its_field(tmp_path: Path) -> None:
    path = tmp_path / "requests.yaml"
    path.write_text(
        _pool_documents() + "---\n" + REQUEST.replace("check-capacity.autoscaling", "queued.example")
    )
    result = cli("simulate", path)
    assert result.returncode == 1
    assert "spec.provisioningClassName" in result.stderr and "queued.example.x-k8s.io" in result.stderr


def test_an_expiring_gang_is_replaced_whole_in_one_command(tmp_path: Path) -> None:
    """gang-shortage.yaml with room for the gang and a pool whose nodes expire after 1h: the gang's four
    nodes expire together and are replaced by one command launching four nodes, not held or one by one."""
    docs = list(yaml.safe_load_all(SHORTAGE.read_text()))
    scenario, pool = docs[0], docs[1]
    scenario["spec"].pop("capacity")
    scenario["spec"]["timeline"] = scenario["spec"]["timeline"][:1]
    scenario["spec"]["duration"] = "90m"
    pool["spec"]["template"]["spec"]["expireAfter"] = "1h"
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "100%"}]
    path = tmp_path / "expiring.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    doc = run_json(path)
    first = sorted(c["name"] for c in doc["nodeClaims"])[:4]
    expired = [a for a in doc["actions"] if a["method"] == "expiration"]
    assert sorted(a["node"] for a in expired) == first
    assert len({a["time"] for a in expired}) == 1, "all four at once"
    assert {len(a["replacementNodes"]) for a in expired} == {4}, "one command, four replacements"
