"""GPUs as fleets have them in 2026, through `provisioner simulate` as a user runs it and through the real
controllers on a virtual clock: MIG slices packed onto the cheapest node whose layout holds them, H200 and
B200 on both clouds at their list prices, AMD and Neuron pods placed and counted like GPUs, and the GPU
reasons of `report nodes`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.api import mig
from provisioner.api.nodeclaim import INITIALIZED
from provisioner.finops.ledger import Ledger
from provisioner.finops.reports import nodes as node_report
from provisioner.sim import scenario as scenario_
from provisioner.sim import timeline as timeline_
from provisioner.sim.records import RunResult
from provisioner.sim.runner import Runner
from tests.e2e.test_classes import claims_of, reasons_of, simulate
from tests.e2e.test_simulate import ROOT

MIG = ROOT / "scenarios" / "mig-inference.yaml"
TRAINING = ROOT / "scenarios" / "h200-b200-training.yaml"


def test_seven_1g_slices_share_one_h100_whose_layout_holds_them() -> None:
    doc = simulate(MIG)
    claims = claims_of(doc)

    embedders = {claims[f"serving/embedder-{i}"]["name"] for i in range(7)}
    assert len(embedders) == 1
    (claim,) = [c for c in doc["nodeClaims"] if c["name"] in embedders]
    assert claim["nodePool"] == "h100-mig-1g"
    # The cheapest H100 node whose layout holds seven 1g.10gb slices: one H100 (p5.4xlarge), not eight.
    assert claim["instanceType"] == "p5.4xlarge"
    assert claim["gpu"]["migConfig"] == "all-1g.10gb"
    assert claim["gpu"]["slices"] == {"nvidia.com/mig-1g.10gb": 7}
    reranker = claims["serving/reranker-0"]
    assert reranker["nodePool"] == "h100-mig-3g" and claims["serving/reranker-1"] is reranker
    assert doc["unschedulable"] == []


def test_an_eighth_slice_opens_a_second_node(tmp_path: Path) -> None:
    text = MIG.read_text().replace("replicas: 7", "replicas: 8")
    path = tmp_path / "mig.yaml"
    path.write_text(text)
    claims = claims_of(simulate(path))

    nodes = {claims[f"serving/embedder-{i}"]["name"] for i in range(8)}
    assert len(nodes) == 2


def _run(tmp_path: Path, text: str, duration: str) -> RunResult:
    """The scenario run by the real controllers for `duration` of virtual time."""
    path = tmp_path / "timed.yaml"
    path.write_text(
        text.replace("  region: us-east-1\n", f"  region: us-east-1\n  duration: {duration}\n", 1)
    )
    loaded = scenario_.load(path)
    timeline = timeline_.load(loaded)
    assert timeline is not None
    with Ledger("sqlite://") as ledger:
        return Runner(loaded, timeline, ledger=ledger).run()


def _mig_node(result: RunResult) -> Any:
    (name,) = [n for n, node in result.state.nodes.items() if node.labels.get(wk.NODEPOOL) == "h100-mig-1g"]
    return result.state.nodes[name]


def test_a_mig_node_carries_its_layout_from_its_first_moment_and_its_slices_wait_for_the_mig_manager(
    tmp_path: Path,
) -> None:
    # 45 s: the node booted (30 s) and registered, the MIG manager (60 s after registration) not done yet.
    early = _run(tmp_path, MIG.read_text(), "45s")
    node = _mig_node(early)
    assert node.labels[mig.MIG_CONFIG_LABEL] == "all-1g.10gb"
    assert node.labels[mig.MIG_STATE_LABEL] == "pending"
    assert node.allocatable.get("nvidia.com/mig-1g.10gb", 0) == 0
    assert not any(p.node_name == node.name for p in early.state.pods.values())
    snap = early.state.snapshot()
    (row,) = [r for r in node_report.node_rows(snap) if r.name == node.name]
    assert row.status == "Not ready"
    assert "MIG layout all-1g.10gb pending" in row.reasons
    # Pending, not missing: the claim is not initialized yet, and it asked for the slices it waits for.
    claim = early.state.claims[node.name]
    assert not any(c.type == INITIALIZED and c.status.value == "True" for c in claim.status.conditions)
    assert claim.spec.resources.requests["nvidia.com/mig-1g.10gb"] == "7"


def test_once_the_layout_is_applied_the_seven_slices_run_on_one_initialized_node(tmp_path: Path) -> None:
    done = _run(tmp_path, MIG.read_text(), "10m")
    node = _mig_node(done)
    assert node.labels[mig.MIG_STATE_LABEL] == "success"
    assert node.allocatable["nvidia.com/mig-1g.10gb"] == 7
    on_node = sorted(
        p.name for p in done.state.pods.values() if p.node_name == node.name and not p.is_daemonset_pod
    )
    assert on_node == [f"embedder-{i}" for i in range(7)]
    claim = done.state.claims[node.name]
    assert any(c.type == INITIALIZED and c.status.value == "True" for c in claim.status.conditions)
    snap = done.state.snapshot()
    (row,) = [r for r in node_report.node_rows(snap) if r.name == node.name]
    assert (row.status, row.gpu_name, row.gpus, row.gpus_allocated) == ("Ready", "h100 all-1g.10gb", 7, 7)
    assert len(done.state.claims) == 3  # no replacement: the pending slices were waited for


@pytest.mark.parametrize(
    ("pod", "instance_type", "on_demand"),
    [
        ("training/h200-0", "p5en.48xlarge", 63.296),
        ("training/b200-0", "p6-b200.48xlarge", 113.9328),
        ("training/h200-gcp-0", "a3-ultragpu-8g", 84.806908),
        ("training/b200-gcp-0", "a4-highgpu-8g", 106.0),
    ],
    ids=["aws-h200-p5en", "aws-b200-p6", "gcp-h200-a3-ultra", "gcp-b200-a4"],
)
def test_h200_and_b200_training_gets_its_machine_at_its_list_price(
    pod: str, instance_type: str, on_demand: float
) -> None:
    claim = claims_of(simulate(TRAINING))[pod]
    assert claim["instanceType"] == instance_type
    assert claim["capacityType"] == "on-demand"
    assert claim["pricePerHour"] == on_demand
    assert claim["gpu"]["count"] == 8


def test_neuron_and_amd_pods_are_placed_and_counted_like_gpus() -> None:
    doc = simulate(TRAINING)
    claims = claims_of(doc)
    assert claims["training/trainium-0"]["instanceType"] == "trn1.32xlarge"
    assert claims["training/inferentia-0"]["instanceType"] == "inf2.xlarge"
    assert claims["training/radeon-0"]["instanceType"].startswith("g4ad.")
    assert claims["training/trainium-0"]["gpu"] == {"name": "trainium", "count": 16, "memoryMiB": 32768}
    assert doc["unschedulable"] == []
    # Counted like GPUs: 4 x 8 NVIDIA, 16 Trainium, 1 Inferentia, 1 AMD.
    assert sum(c["gpu"]["count"] for c in doc["nodeClaims"]) == 50


ANY_NVIDIA = """\
apiVersion: provisioner.sh/v1alpha1
kind: Scenario
metadata: {name: t}
spec: {catalog: aws, region: us-east-1}
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {kind: AWSNodeClass, name: default}
      requirements: [{key: provisioner.sh/gpu-manufacturer, operator: In, values: [nvidia]}]
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  nodeSelector: {provisioner.sh/gpu-name: mi300x}
  containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 8}}}]
"""


def test_a_gpu_model_the_region_lacks_is_one_line_naming_what_the_catalog_has(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(ANY_NVIDIA)
    reason = reasons_of(simulate(path))["default/p"]["gpu"]
    assert reason == (
        "no instance type in us-east-1 offers gpu-name In [mi300x]; "
        "the pool's catalog has a100, a10g, b200, h100, h200, l4, l40s, t4, v100"
    )


CONSOLIDATION = """\
apiVersion: provisioner.sh/v1alpha1
kind: Scenario
metadata: {name: mig-consolidation}
spec:
  catalog: aws
  region: us-east-1
  duration: 2h
  timeline:
    - at: 30m
      delete:
        - {kind: Pod, namespace: serving, name: embedder-0}
        - {kind: Pod, namespace: serving, name: embedder-1}
        - {kind: Pod, namespace: serving, name: embedder-2}
        - {kind: Pod, namespace: serving, name: embedder-3}
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: h100-mig-1g}
spec:
  template:
    metadata:
      labels: {nvidia.com/mig.config: all-1g.10gb}
    spec:
      nodeClassRef: {kind: AWSNodeClass, name: default}
      requirements:
        - {key: provisioner.sh/gpu-name, operator: In, values: [h100]}
        - {key: provisioner.sh/capacity-type, operator: In, values: [on-demand]}
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 5m
    budgets: [{nodes: "100%"}]
"""

SLICE_POD = """\
---
apiVersion: v1
kind: Pod
metadata:
  name: embedder-{i}
  namespace: serving
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: embedder, uid: u1, controller: true}}]
spec:
  tolerations: [{{key: nvidia.com/gpu, operator: Exists}}]
  containers:
    - {{name: c, image: i, resources: {{requests: {{cpu: "1", memory: 8Gi, nvidia.com/mig-1g.10gb: "1"}}}}}}
"""


def test_consolidation_moves_slices_onto_the_node_whose_layout_has_room(tmp_path: Path) -> None:
    # Eight one-slice pods: two one-H100 nodes (7 + 1). Four leave: the lone slice moves beside the other
    # three, and its node goes.
    path = tmp_path / "c.yaml"
    path.write_text(CONSOLIDATION + "".join(SLICE_POD.format(i=i) for i in range(8)))
    doc = simulate(path)

    (action,) = doc["actions"]
    assert (action["action"], action["reason"], action["instanceType"]) == (
        "delete",
        "Underutilized",
        "p5.4xlarge",
    )
    assert action["pods"] == ["serving/embedder-7"]
    (alive,) = doc["nodes"]
    assert alive["pods"] == [f"serving/embedder-{i}" for i in range(4, 8)]
