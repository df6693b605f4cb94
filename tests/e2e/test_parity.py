"""Scenarios translated from Karpenter's own scheduling and disruption tests (issue 11), run through
`provisioner simulate` as a user runs it: static solves and timelines over virtual time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
