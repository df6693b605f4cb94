"""Scenarios translated from Karpenter's own scheduling and disruption tests (issue 11), run through
`provisioner simulate` as a user runs it: static solves and timelines over virtual time."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from provisioner.api.durations import parse_duration
from tests.e2e import test_timeline as timeline
from tests.e2e.test_simulate import GPU_POOL, HEADER, cli


def simulate(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    result = cli("simulate", path, "--output", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def pods_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pod key -> the claim that holds it."""
    return {p: c for c in doc["nodeClaims"] for p in c["pods"]}


def reasons(doc: dict[str, Any], pod: str) -> list[dict[str, str]]:
    found = [u["reasons"] for u in doc["unschedulable"] if u["pod"] == pod]
    assert found, f"{pod} is not unschedulable: {doc['unschedulable']}"
    return found[0]


CPU_POOL = """\
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: cpu}
spec:
  template:
    spec:
      nodeClassRef: {kind: AWSNodeClass, name: cpu}
      requirements:
        - {key: provisioner.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: provisioner.sh/instance-family, operator: In, values: [m7i]}
"""


def pod(name: str, *, requests: str, spec: str = "", namespace: str = "ml") -> str:
    return f"""\
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
{spec}  containers:
    - name: c
      resources: {{requests: {requests}}}
"""


# Bad input ---------------------------------------------------------------------------------------------


def test_a_pod_asking_for_minus_one_gpu_is_unschedulable_with_the_reason(tmp_path):
    text = HEADER + GPU_POOL
    text += pod(
        "bad",
        requests='{cpu: "1", nvidia.com/gpu: "-1"}',
        spec="  tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n",
    )
    text += pod(
        "good",
        requests='{cpu: "1", nvidia.com/gpu: "1"}',
        spec="  tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n",
    )
    doc = simulate(tmp_path, text)
    assert set(pods_of(doc)) == {"ml/good"}
    (reason,) = reasons(doc, "ml/bad")
    assert "spec.containers[0].resources.requests.nvidia.com/gpu: '-1' is negative" in reason["reason"]


# Pod-level resources -----------------------------------------------------------------------------------


def test_pod_level_resources_size_the_node_not_the_containers_sum(tmp_path):
    spec = '  resources: {requests: {cpu: "1", memory: 2Gi}}\n'
    text = HEADER + CPU_POOL + pod("shared", requests='{cpu: "30", memory: 100Gi}', spec=spec)
    doc = simulate(tmp_path, text)
    (claim,) = doc["nodeClaims"]
    assert claim["instanceType"] == "m7i.large", "1 vCPU and 2 GiB fit the smallest m7i"


# do-not-disrupt with a duration --------------------------------------------------------------------------


def underused_gpu_node(annotation: str) -> str:
    """A big GPU node whose big job ends at 30m, leaving a 1-GPU pod that a g6.xlarge could hold."""
    text = timeline.scenario(
        duration="3h",
        timeline="    - at: 30m\n      delete:\n        - {kind: Job, namespace: ml, name: big}\n",
    )
    text += timeline.gpu_pool(
        types="[g6.xlarge, g6.12xlarge]", policy="WhenEmptyOrUnderutilized", capacity="[on-demand]"
    )
    text += timeline.workload("Job", "big", count=1, gpus=3, cpu="8")
    return text + timeline.workload("Deployment", "small", count=1, gpus=1).replace(
        "      labels: {app: small}\n",
        f"      labels: {{app: small}}\n      annotations: {{provisioner.sh/do-not-disrupt: '{annotation}'}}\n",
    )


def test_a_do_not_disrupt_duration_keeps_the_node_until_it_lapses_then_it_is_consolidated(tmp_path):
    doc = timeline.run_json(timeline.write(tmp_path, underused_gpu_node("2h")))
    (action,) = doc["actions"]
    assert action["replacement"] == "g6.xlarge" and "ml/small-0" in action["pods"]
    assert parse_duration(action["at"]) >= timedelta(hours=2), "not before the pod has run for two hours"
    assert not [e for e in doc["events"] if e["reason"] == "InvalidDoNotDisruptAnnotation"]


def test_an_invalid_do_not_disrupt_value_is_an_event_and_ignored(tmp_path):
    doc = timeline.run_json(timeline.write(tmp_path, underused_gpu_node("forever")))
    (action,) = doc["actions"]
    assert parse_duration(action["at"]) < timedelta(hours=1), "consolidated soon after the big job ended"
    (event,) = [e for e in doc["events"] if e["reason"] == "InvalidDoNotDisruptAnnotation"]
    assert event["name"] == "small-0" and "'forever'" in event["message"]


# PDBs over DaemonSet pods ------------------------------------------------------------------------------

AGENT_DAEMONSET = """\
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: monitoring}
spec:
  template:
    metadata:
      labels: {app: agent}
    spec:
      tolerations: [{operator: Exists}]
      containers:
        - {name: agent, resources: {requests: {cpu: 100m, memory: 128Mi}}}
"""

AGENT_PDB = """\
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: agent, namespace: monitoring}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: agent}}
"""


@pytest.mark.parametrize(
    ("pdb", "kept"),
    [pytest.param("", False, id="no-pdb"), pytest.param(AGENT_PDB, True, id="pdb-allows-none")],
)
def test_a_pdb_over_daemonset_pods_keeps_an_empty_node(tmp_path, pdb, kept):
    text = timeline.scenario(
        duration="2h",
        timeline="    - at: 30m\n      delete:\n        - {kind: Job, namespace: ml, name: train}\n",
    )
    text += timeline.gpu_pool(types="[g6.xlarge]", consolidate_after="5m", capacity="[on-demand]")
    text += timeline.workload("Job", "train", count=1, gpus=1) + AGENT_DAEMONSET + pdb
    doc = timeline.run_json(timeline.write(tmp_path, text))
    (claim,) = doc["nodeClaims"]
    if kept:
        assert doc["actions"] == []
        assert [n["name"] for n in doc["nodes"]] == [claim["name"]]
    else:
        (action,) = doc["actions"]
        assert action["reason"] == "Empty" and action["node"] == claim["name"]


# Expiration --------------------------------------------------------------------------------------------


def test_an_expired_node_held_by_do_not_disrupt_and_a_pdb_is_gone_by_expire_after_plus_the_grace_period(
    tmp_path,
):
    text = timeline.scenario(duration="4h")
    text += timeline.gpu_pool(types="[g6.xlarge]", capacity="[on-demand]").replace(
        "      taints:\n",
        "      expireAfter: 1h\n      terminationGracePeriod: 30m\n      taints:\n",
    )
    pinned = timeline.workload("Deployment", "serve", count=1, gpus=1).replace(
        "      labels: {app: serve}\n",
        "      labels: {app: serve}\n      annotations: {provisioner.sh/do-not-disrupt: 'true'}\n",
    )
    text += pinned + timeline.PDB_NONE_MAY_GO.replace("small", "serve")
    doc = timeline.run_json(timeline.write(tmp_path, text))
    first = min(doc["nodeClaims"], key=lambda c: c["launchedAt"])
    assert first["deletedAt"] is not None, "an expired node never stays"
    launched = datetime.fromisoformat(first["launchedAt"])
    deleted = datetime.fromisoformat(first["deletedAt"])
    assert timedelta(hours=1) <= deleted - launched <= timedelta(hours=1, minutes=32)
    expired = [a for a in doc["actions"] if a["node"] == first["name"]]
    assert [a["reason"] for a in expired] == ["Expired"]
    assert [p["pod"] for p in doc["placements"]] == ["ml/serve-0"], "the pod runs again elsewhere"
