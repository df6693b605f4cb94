"""`provisioner simulate` and `provisioner explain` as a user runs them: the installed console script on
scenario files, checking the JSON contract, the table, exit codes and error messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "scenarios" / "demo.yaml"
PROVISIONER = Path(sys.executable).parent / "provisioner"


def cli(*args: str | Path, hash_seed: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(PROVISIONER)] if PROVISIONER.exists() else [sys.executable, "-m", "provisioner.cli"]
    env = None
    if hash_seed is not None:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
        env=env,
    )


def simulate_json(path: Path) -> dict[str, Any]:
    result = cli("simulate", path, "--output", "json")
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


HEADER = """\
apiVersion: provisioner.sh/v1alpha1
kind: Scenario
metadata: {name: t}
spec:
  catalog: aws
  region: us-east-1
"""

GPU_POOL = """\
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {kind: AWSNodeClass, name: gpu}
      requirements:
        - {key: provisioner.sh/capacity-type, operator: In, values: [spot, on-demand]}
      taints:
        - {key: nvidia.com/gpu, effect: NoSchedule}
"""


def gpu_job(name: str, *, gpus: int, gpu_name: str, parallelism: int = 1, extra: str = "") -> str:
    return f"""\
---
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: ml}}
spec:
  parallelism: {parallelism}
  template:
    metadata: {{labels: {{app: {name}}}{extra}}}
    spec:
      nodeSelector: {{provisioner.sh/gpu-name: {gpu_name}}}
      tolerations: [{{key: nvidia.com/gpu, operator: Exists}}]
      containers:
        - name: c
          resources: {{requests: {{cpu: "4", memory: 32Gi, nvidia.com/gpu: "{gpus}"}}}}
"""


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    def _write(text: str, name: str = "s.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return _write


def test_demo_json_follows_the_contract() -> None:
    doc = simulate_json(DEMO)
    assert set(doc) >= {"nodeClaims", "placements", "unschedulable", "costPerHour"}
    for claim in doc["nodeClaims"]:
        assert set(claim) >= {
            "name",
            "nodePool",
            "instanceType",
            "zone",
            "capacityType",
            "pricePerHour",
            "gpu",
            "pods",
        }
        assert claim["gpu"] is None or set(claim["gpu"]) == {"name", "count", "memoryMiB"}
    assert doc["costPerHour"] == pytest.approx(sum(c["pricePerHour"] for c in doc["nodeClaims"]), abs=1e-4)
    pretrain = [c for c in doc["nodeClaims"] if any(p.startswith("ml/llm-pretrain") for p in c["pods"])]
    assert pretrain and all(
        (c["instanceType"], c["capacityType"]) == ("p5.48xlarge", "on-demand") for c in pretrain
    )
    (giant,) = doc["unschedulable"]
    assert giant["pod"] == "ml/giant-pretrain"
    assert [r["nodePool"] for r in giant["reasons"]] == [
        "gpu-training",
        "gpu-inference",
        "cpu-default",
        "inference-spot",
    ]
    embedding = {
        p: c["nodePool"] for c in doc["nodeClaims"] for p in c["pods"] if p.startswith("serving/embedding")
    }
    assert sorted(embedding.values()) == ["gpu-inference", "inference-spot"]


def test_demo_table_shows_claims_fallback_and_reasons() -> None:
    result = cli("simulate", DEMO)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "NodePool gpu-training" in out and "p5.48xlarge" in out
    assert "spot unavailable -> on-demand" in out
    assert "ml/giant-pretrain" in out and "no instance type is big enough" in out


def test_spot_stockout_falls_back_to_on_demand(write: Callable[..., Path]) -> None:
    text = HEADER + "  unavailable:\n    - {capacityType: spot}\n" + GPU_POOL
    text += gpu_job("train", gpus=8, gpu_name="a100")
    doc = simulate_json(write(text))
    (claim,) = doc["nodeClaims"]
    assert claim["capacityType"] == "on-demand"
    assert claim["gpu"] == {"name": "a100", "count": 8, "memoryMiB": 40960}


def test_zone_stockout_moves_to_another_zone(write: Callable[..., Path]) -> None:
    text = (
        HEADER + "  unavailable:\n    - {zone: us-east-1a}\n" + GPU_POOL + gpu_job("t", gpus=1, gpu_name="l4")
    )
    (claim,) = simulate_json(write(text))["nodeClaims"]
    assert claim["zone"] != "us-east-1a"


def test_everything_stocked_out_is_unschedulable_with_the_reason(write: Callable[..., Path]) -> None:
    text = (
        HEADER
        + "  unavailable:\n    - {instanceType: p5.48xlarge}\n"
        + GPU_POOL
        + gpu_job("t", gpus=8, gpu_name="h100")
    )
    result = cli("simulate", write(text), "-o", "json")
    assert result.returncode == 0
    (u,) = json.loads(result.stdout)["unschedulable"]
    assert "unavailable" in u["reasons"][0]["reason"]


def test_pool_limits_and_existing_nodes_are_counted(write: Callable[..., Path]) -> None:
    text = HEADER + GPU_POOL.replace(
        "spec:\n  template:", 'spec:\n  limits: {nvidia.com/gpu: "8"}\n  template:'
    )
    text += """\
---
apiVersion: v1
kind: Node
metadata:
  name: existing-a100
  labels:
    provisioner.sh/nodepool: gpu
    node.kubernetes.io/instance-type: p4d.24xlarge
    topology.kubernetes.io/zone: us-east-1a
    provisioner.sh/gpu-name: a100
spec:
  taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
"""
    text += gpu_job("t", gpus=8, gpu_name="a100", parallelism=2)
    doc = simulate_json(write(text))
    assert len(doc["placements"]) == 1 and doc["placements"][0]["node"] == "existing-a100"
    (u,) = doc["unschedulable"]
    assert "limit nvidia.com/gpu=8" in u["reasons"][0]["reason"]


def test_deployment_topology_spread_over_zones(write: Callable[..., Path]) -> None:
    text = (
        HEADER
        + """\
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: cpu}
spec:
  template:
    spec:
      nodeClassRef: {kind: AWSNodeClass, name: default}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  template:
    metadata: {labels: {app: web}}
    spec:
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,
           labelSelector: {matchLabels: {app: web}}}
      containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""
    )
    doc = simulate_json(write(text))
    assert len({c["zone"] for c in doc["nodeClaims"]}) == 3
    assert sorted(p for c in doc["nodeClaims"] for p in c["pods"]) == [
        "default/web-0",
        "default/web-1",
        "default/web-2",
    ]


def test_gcp_catalog_and_statefulset(write: Callable[..., Path]) -> None:
    text = """\
apiVersion: provisioner.sh/v1alpha1
kind: Scenario
spec: {catalog: gcp}
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {kind: GCPNodeClass, name: gpu}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: infer}
spec:
  replicas: 2
  template:
    spec:
      nodeSelector: {provisioner.sh/gpu-name: h100}
      containers: [{name: c, resources: {requests: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "1"}}}]
"""
    doc = simulate_json(write(text))
    assert {c["gpu"]["name"] for c in doc["nodeClaims"]} == {"h100"}
    assert sum(len(c["pods"]) for c in doc["nodeClaims"]) == 2


def test_same_scenario_same_output_whatever_the_hash_seed() -> None:
    first = cli("simulate", DEMO, "-o", "json", hash_seed="1").stdout
    assert first and cli("simulate", DEMO, "-o", "json", hash_seed="2").stdout == first


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HEADER.replace("catalog: aws", "catalog: azure") + GPU_POOL, "spec.catalog"),
        (
            HEADER + "  unavailable:\n    - {instanceType: nope.large}\n" + GPU_POOL,
            "spec.unavailable[0].instanceType",
        ),
        (HEADER + GPU_POOL.replace("operator: In", "operator: Has"), "Has"),
        (HEADER + GPU_POOL + "---\napiVersion: v1\nkind: Widget\nmetadata: {name: w}\n", 'kind "Widget"'),
        (HEADER + GPU_POOL + gpu_job("t", gpus=1, gpu_name="l4").replace('cpu: "4"', "cpu: lots"), "lots"),
        (HEADER + "spec: [\n", "not valid YAML"),
        (
            HEADER + GPU_POOL.replace("kind: AWSNodeClass", "kind: GCPNodeClass"),
            "spec.template.spec.nodeClassRef.kind: kind 'GCPNodeClass' cannot launch from the aws catalog",
        ),
    ],
    ids=[
        "unknown-catalog",
        "unknown-type",
        "bad-operator",
        "unknown-kind",
        "bad-quantity",
        "bad-yaml",
        "nodeclass-of-another-cloud",
    ],
)
def test_invalid_scenario_is_a_located_error_and_exit_1(
    write: Callable[..., Path], text: str, expected: str
) -> None:
    path = write(text)
    result = cli("simulate", path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert str(path) in result.stderr
    assert expected in result.stderr


def test_missing_file_is_an_error() -> None:
    result = cli("simulate", "does-not-exist.yaml")
    assert result.returncode == 1 and "does-not-exist.yaml" in result.stderr


def test_explain_lists_each_pool_with_verdict_and_cost() -> None:
    result = cli("explain", DEMO, "--pod", "ml/giant-pretrain")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for pool in ("gpu-training", "gpu-inference", "cpu-default", "inference-spot"):
        assert pool in out
    assert "no instance type is big enough" in out
    assert "In the full solve: unschedulable" in out

    fits = cli("explain", DEMO, "--pod", "serving/embedding-0")
    assert fits.returncode == 0
    assert "yes" in fits.stdout and "$/h" in fits.stdout


def test_explain_unknown_pod_exit_1() -> None:
    result = cli("explain", DEMO, "--pod", "ml/nobody")
    assert result.returncode == 1 and "ml/nobody" in result.stderr


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_bundled_scenario_runs(path: Path) -> None:
    doc = simulate_json(path)
    placed = sum(len(c["pods"]) for c in doc["nodeClaims"]) + len(doc["placements"])
    assert placed + len(doc["unschedulable"]) > 0


def test_existing_cluster_scenario_fills_room_then_hits_the_limit() -> None:
    doc = simulate_json(ROOT / "scenarios" / "existing-cluster.yaml")
    assert {p["node"] for p in doc["placements"]} == {"a100-node-1", "a100-node-2"}
    assert [c["pods"] for c in doc["nodeClaims"]] == [["ml/big-1"]]
    assert len(doc["unschedulable"]) == 5
    assert all("limit nvidia.com/gpu=32" in u["reasons"][0]["reason"] for u in doc["unschedulable"])
