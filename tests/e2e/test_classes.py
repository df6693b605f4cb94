"""The bundled templates as a platform team ships them, run by `provisioner simulate` as a user runs it:
each class of capacity takes its own work and refuses the rest (`scenarios/classes.yaml`), AWS and GCP
pools run in one scenario, and the cluster's default pools route pods that name no list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from tests.e2e.test_simulate import ROOT, cli

CLASSES = ROOT / "scenarios" / "classes.yaml"
TEMPLATES = ROOT / "nodepool_templates"


def simulate(*paths: str | Path) -> dict[str, Any]:
    result = cli("simulate", *paths, "--output", "json")
    assert result.returncode == 0, result.stderr
    return cast(dict[str, Any], json.loads(result.stdout))


def claims_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pod -> the claim it landed on."""
    return {pod: claim for claim in doc["nodeClaims"] for pod in claim["pods"]}


def reasons_of(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Unschedulable pod -> {pool: reason}."""
    return {u["pod"]: {r["nodePool"]: r["reason"] for r in u["reasons"]} for u in doc["unschedulable"]}


@pytest.fixture(scope="module")
def classes() -> dict[str, Any]:
    return simulate(CLASSES)


@pytest.mark.parametrize(
    ("pod", "pool", "gpus", "gpu_names"),
    [
        ("research/notebook", "t4-best-effort-aws", 1, {"t4", "l4"}),
        ("research/sweep-0", "t4-best-effort-aws", 4, {"t4", "l4"}),
        ("training/pretrain-0", "h100-prod-aws", 8, {"h100"}),
        ("training/pretrain-1", "h100-prod-aws", 8, {"h100"}),
        ("serving/chat-0", "inference-only-aws", 1, {"t4", "l4", "a10g"}),
        ("serving/chat-2", "inference-only-aws", 1, {"t4", "l4", "a10g"}),
        ("data/etl-0", "spot-only-aws", 0, set()),
        ("data/etl-3", "spot-only-aws", 0, set()),
        ("web/api-0", "cpu-default-aws", 0, set()),
        ("research/finetune", "a100-standard-gcp", 1, {"a100"}),
        ("research/giant", "a100-standard-gcp", 16, {"a100"}),
    ],
    ids=[
        "untyped-1-gpu-cheapest-general-class-smallest-node",
        "untyped-4-gpus-a-4-gpu-node-not-8",
        "h100-training-h100-prod",
        "h100-training-second-node",
        "inference-inference-only",
        "inference-third-replica",
        "batch-on-spot-spot-only",
        "batch-on-spot-last-pod",
        "cpu-service-cpu-default",
        "named-gcp-pool-launches-on-gcp",
        "sixteen-gpus-on-gcps-a2-megagpu-16g",
    ],
)
def test_each_class_takes_its_own_work(
    classes: dict[str, Any], pod: str, pool: str, gpus: int, gpu_names: set[str]
) -> None:
    claim = claims_of(classes)[pod]
    assert claim["nodePool"] == pool
    assert (claim["gpu"] or {}).get("count", 0) == gpus
    if gpu_names:
        assert claim["gpu"]["name"] in gpu_names


def test_spot_only_launches_spot_and_h100_prod_on_demand(classes: dict[str, Any]) -> None:
    by_pool: dict[str, set[str]] = {}
    for claim in classes["nodeClaims"]:
        by_pool.setdefault(claim["nodePool"], set()).add(claim["capacityType"])
    assert by_pool["spot-only-aws"] == {"spot"}
    assert by_pool["h100-prod-aws"] == {"on-demand"}


def test_no_untyped_gpu_pod_lands_on_h100_or_a_bigger_node_than_it_needs(classes: dict[str, Any]) -> None:
    claims = claims_of(classes)
    for pod in ("research/notebook", "research/sweep-0"):
        claim = claims[pod]
        assert claim["gpu"]["name"] != "h100"
        # The smallest node of its class with enough GPUs: no cheaper option holds fewer GPUs.
        assert claim["gpu"]["count"] == (1 if pod == "research/notebook" else 4)


@pytest.mark.parametrize(
    ("pod", "pool", "words"),
    [
        ("research/h100-no-toleration", "h100-prod-aws", "taint tier=h100-prod:NoSchedule is not tolerated"),
        ("research/h100-no-toleration", "a100-standard-aws", "gpu-name In [h100] conflicts"),
        ("serving/big-model", "inference-only-aws", "nvidia.com/gpu 2; the largest is"),
        ("research/no-gpu-toleration", "t4-best-effort-aws", "taint nvidia.com/gpu=true:NoSchedule"),
        ("research/no-gpu-toleration", "spot-only-aws", "taint tier=spot-only:NoSchedule"),
    ],
    ids=[
        "h100-without-toleration-refused-by-its-taint",
        "h100-never-moved-to-another-model",
        "two-gpu-serving-refused-by-inference-only",
        "gpu-pod-without-gpu-toleration",
        "spot-only-keeps-untolerating-pods-out",
    ],
)
def test_the_rest_is_refused_with_a_reason_per_pool(
    classes: dict[str, Any], pod: str, pool: str, words: str
) -> None:
    reasons = reasons_of(classes)[pod]
    assert len(reasons) == 12, "every pool of both clouds gives its reason"
    assert words in reasons[pool]


def test_only_the_refused_pods_are_unschedulable(classes: dict[str, Any]) -> None:
    assert set(reasons_of(classes)) == {
        "research/h100-no-toleration",
        "serving/big-model",
        "research/no-gpu-toleration",
    }


def test_the_bundled_templates_and_a_pod_file_simulate_as_shipped_with_no_scenario_document(
    tmp_path: Path,
) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: on-gcp, annotations: {provisioner.sh/nodepools: "cpu-default-gcp"}}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""
    )
    result = cli("simulate", TEMPLATES, pods)
    assert result.returncode == 0, result.stderr
    assert "catalog aws us-east-1 + gcp us-central1" in result.stdout
    claims = claims_of(simulate(TEMPLATES, pods))
    assert claims["default/web"]["nodePool"] in {"cpu-default-aws", "cpu-default-gcp"}
    assert claims["default/on-gcp"]["zone"].startswith("us-central1")
    assert claims["default/on-gcp"]["instanceType"].split("-")[0] in {"e2", "n2", "n1"}


def test_every_bundled_pool_can_launch_from_its_clouds_catalog(tmp_path: Path) -> None:
    """A pool whose requirements match no type of its cloud (a misspelt family) would refuse every pod."""
    pods = tmp_path / "pods.yaml"
    docs = []
    for name in sorted(p.stem for p in TEMPLATES.glob("*.yaml")):
        for cloud in ("aws", "gcp"):
            gpu = name not in ("spot-only", "cpu-default")
            docs.append(
                f"""\
apiVersion: v1
kind: Pod
metadata: {{name: {name}-{cloud}, annotations: {{provisioner.sh/nodepools: {name}-{cloud}}}}}
spec:
  tolerations: [{{operator: Exists}}]
  containers: [{{name: c, resources: {{requests: {{cpu: "1", memory: 1Gi}}{", limits: {nvidia.com/gpu: 1}" if gpu else ""}}}}}]
"""
            )
    pods.write_text("---\n".join(docs))
    doc = simulate(TEMPLATES, pods)
    assert not doc["unschedulable"], reasons_of(doc)
    assert {c["nodePool"] for c in doc["nodeClaims"]} == {
        f"{p.stem}-{c}" for p in TEMPLATES.glob("*.yaml") for c in ("aws", "gcp")
    }


def test_cluster_default_pools_route_pods_naming_no_list_and_refuse_what_they_cannot_serve(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "defaults.yaml"
    scenario.write_text(
        f"""\
apiVersion: provisioner.sh/v1alpha1
kind: Scenario
metadata: {{name: defaults}}
spec:
  include: [{TEMPLATES}]
  defaultNodePools:
    cpu: [cpu-default-gcp]
    gpu: [a100-standard-gcp, t4-best-effort-gcp]
---
apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  containers: [{{name: c, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: train}}
spec:
  tolerations: [{{key: nvidia.com/gpu, operator: Exists}}]
  containers: [{{name: c, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]
"""
    )
    claims = claims_of(simulate(scenario))
    assert claims["default/web"]["nodePool"] == "cpu-default-gcp"
    assert claims["default/train"]["nodePool"] == "a100-standard-gcp"

    misrouted = scenario.read_text().replace(
        "gpu: [a100-standard-gcp, t4-best-effort-gcp]", "gpu: [spot-only-gcp]"
    )
    scenario.write_text(misrouted)
    reasons = reasons_of(simulate(scenario))["default/train"]
    assert list(reasons) == ["spot-only-gcp"]
    assert (
        "the cluster's default GPU pools (spot-only-gcp) and none of them launches GPU nodes"
        in reasons["spot-only-gcp"]
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "  defaultNodePools: {cpu: [nope]}\n",
            "spec.defaultNodePools.cpu[0]: NodePool 'nope' is not in the scenario",
        ),
        ("  include: [missing-folder]\n", "spec.include[0]: includes"),
        (
            "  catalogs: [{name: aws}, {name: aws, region: us-west-2}]\n",
            "AWSNodeClass pools are already served",
        ),
        ("  catalog: aws\n  catalogs: [{name: gcp}]\n", "give either spec.catalog"),
        ("  catalogs: [{name: gcp, region: mars-1}]\n", "region 'mars-1' is not in the gcp catalog"),
    ],
    ids=[
        "default-pool-unknown",
        "include-missing",
        "one-catalog-per-kind",
        "catalog-and-catalogs",
        "bad-region",
    ],
)
def test_bad_scenario_settings_are_located_errors(tmp_path: Path, spec: str, expected: str) -> None:
    scenario = tmp_path / "bad.yaml"
    include = "" if "include" in spec else f"  include: [{TEMPLATES}]\n"
    scenario.write_text(
        f"apiVersion: provisioner.sh/v1alpha1\nkind: Scenario\nmetadata: {{name: bad}}\nspec:\n{include}{spec}"
    )
    result = cli("simulate", scenario)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"{scenario}:" in result.stderr
    assert expected in result.stderr


@pytest.mark.parametrize(
    ("pod", "origin"),
    [
        ("research/finetune", "from its provisioner.sh/nodepools annotation"),
        ("research/notebook", "from every pool by weight"),
    ],
    ids=["own-list", "no-list"],
)
def test_explain_says_where_a_pods_pool_order_comes_from(pod: str, origin: str) -> None:
    result = cli("explain", CLASSES, "--pod", pod)
    assert result.returncode == 0, result.stderr
    assert f"NodePools in the order tried ({origin})" in result.stdout


def test_with_time_the_controllers_launch_on_both_clouds_and_follow_the_default_pools(tmp_path: Path) -> None:
    scenario = tmp_path / "day.yaml"
    scenario.write_text(
        f"""\
apiVersion: provisioner.sh/v1alpha1
kind: Scenario
metadata: {{name: both-clouds}}
spec:
  include: [{TEMPLATES}]
  duration: 30m
  defaultNodePools:
    gpu: [a100-standard-gcp]
---
apiVersion: v1
kind: Pod
metadata: {{name: train}}
spec:
  tolerations: [{{key: nvidia.com/gpu, operator: Exists}}]
  containers: [{{name: c, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  containers: [{{name: c, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
"""
    )
    doc = simulate(scenario)
    launched = {c["nodePool"]: c for c in doc["nodeClaims"]}
    assert set(launched) == {"a100-standard-gcp", "cpu-default-aws"}
    assert launched["a100-standard-gcp"]["zone"].startswith("us-central1")
    assert launched["cpu-default-aws"]["zone"].startswith("us-east-1")
    assert not doc["unschedulable"]
    assert {p["pod"]: p["node"].rsplit("-", 1)[0] for p in doc["placements"]} == {
        "default/train": "a100-standard-gcp",
        "default/web": "cpu-default-aws",
    }
