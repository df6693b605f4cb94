"""Scenarios translated from Karpenter's own scheduling and disruption tests (issue 11), run through
`provisioner simulate` as a user runs it: static solves and timelines over virtual time."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from provisioner.api.durations import parse_duration
from testkit.typed import present
from tests.e2e import test_timeline as timeline
from tests.e2e.test_simulate import GPU_POOL, HEADER, cli


def simulate(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    result = cli("simulate", path, "--output", "json")
    assert result.returncode == 0, result.stderr
    return cast(dict[str, Any], json.loads(result.stdout))


def pods_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pod key -> the claim that holds it."""
    return {p: c for c in doc["nodeClaims"] for p in c["pods"]}


def reasons(doc: dict[str, Any], pod: str) -> list[dict[str, str]]:
    found = [u["reasons"] for u in doc["unschedulable"] if u["pod"] == pod]
    assert found, f"{pod} is not unschedulable: {doc['unschedulable']}"
    return cast(list[dict[str, str]], found[0])


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


def test_a_pod_asking_for_minus_one_gpu_is_unschedulable_with_the_reason(tmp_path: Path) -> None:
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


def test_simulate_refuses_a_requirement_on_a_typo_under_our_prefix_as_validate_does(tmp_path: Path) -> None:
    pool = CPU_POOL + "        - {key: provisioner.sh/capacity-typ, operator: Exists}\n"
    path = tmp_path / "scenario.yaml"
    path.write_text(HEADER + pool + pod("p", requests='{cpu: "1"}'))
    result = cli("simulate", path, "--output", "json")
    assert result.returncode == 1
    assert result.stdout == ""
    assert (
        f"{path}:18: NodePool/cpu: spec.template.spec.requirements[2].key: provisioner.sh/capacity-typ"
        " is not one of the provisioner's well-known labels (did you mean 'provisioner.sh/capacity-type'?)"
    ) in result.stderr


def test_simulate_refuses_a_negative_volume_size_with_every_other_problem_at_once(tmp_path: Path) -> None:
    nodeclass = """\
---
apiVersion: provisioner.sh/v1
kind: AWSNodeClass
metadata: {name: cpu}
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
  blockDeviceMappings:
    - {deviceName: /dev/xvda, ebs: {volumeSize: -20Gi}}
"""
    pool = CPU_POOL + "        - {key: node.kubernetes.io/instance-type, operator: Gt, values: [oops]}\n"
    path = tmp_path / "scenario.yaml"
    path.write_text(HEADER + nodeclass + pool + pod("p", requests='{cpu: "1"}'))
    result = cli("simulate", path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert any("spec.blockDeviceMappings[0].ebs.volumeSize: '-20Gi' is negative" in line for line in lines)
    assert any("NodePool/cpu: spec.template.spec.requirements[2]" in line for line in lines), lines
    assert lines[-1].endswith("2 problems; the scenario was not run")


# Pod-level resources -----------------------------------------------------------------------------------


def test_pod_level_resources_size_the_node_not_the_containers_sum(tmp_path: Path) -> None:
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


def test_a_do_not_disrupt_duration_keeps_the_node_until_it_lapses_then_it_is_consolidated(
    tmp_path: Path,
) -> None:
    doc = timeline.run_json(timeline.write(tmp_path, underused_gpu_node("2h")))
    (action,) = doc["actions"]
    assert action["replacement"] == "g6.xlarge" and "ml/small-0" in action["pods"]
    assert present(parse_duration(action["at"])) >= timedelta(hours=2), (
        "not before the pod has run for two hours"
    )
    assert not [e for e in doc["events"] if e["reason"] == "InvalidDoNotDisruptAnnotation"]


def test_an_invalid_do_not_disrupt_value_is_an_event_and_ignored(tmp_path: Path) -> None:
    doc = timeline.run_json(timeline.write(tmp_path, underused_gpu_node("forever")))
    (action,) = doc["actions"]
    assert present(parse_duration(action["at"])) < timedelta(hours=1), (
        "consolidated soon after the big job ended"
    )
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
def test_a_pdb_over_daemonset_pods_keeps_an_empty_node(tmp_path: Path, pdb: str, kept: bool) -> None:
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
    tmp_path: Path,
) -> None:
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


# Scheduling (phase 2 of issue 11: after the solver split) ------------------------------------------------


def cpu_pod(name: str, *, cpu: str = "500m", labels: str = "{}", spec: str = "") -> str:
    return f"""\
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: ml, labels: {labels}}}
spec:
{spec}  containers:
    - name: c
      resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}
"""


def follows(app: str, key: str = "kubernetes.io/hostname") -> str:
    return (
        "  affinity:\n    podAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
        f"        - {{topologyKey: {key}, labelSelector: {{matchLabels: {{app: {app}}}}}}}\n"
    )


def test_a_chain_of_hostname_affinities_in_one_batch_lands_on_one_node(tmp_path: Path) -> None:
    text = HEADER + CPU_POOL + cpu_pod("db", cpu="100m", labels="{app: db}")
    text += cpu_pod("web", cpu="1", labels="{app: web}", spec=follows("db"))
    text += cpu_pod("cache", cpu="1500m", labels="{app: cache}", spec=follows("web"))
    text += cpu_pod("ui", cpu="2", labels="{app: ui}", spec=follows("cache"))
    doc = simulate(tmp_path, text)
    assert doc["unschedulable"] == []
    (claim,) = doc["nodeClaims"]
    assert claim["pods"] == ["ml/cache", "ml/db", "ml/ui", "ml/web"]


def test_a_node_selector_on_a_key_the_pool_defines_is_met(tmp_path: Path) -> None:
    pool = CPU_POOL + "        - {key: example.com/tier, operator: In, values: [gold]}\n"
    doc = simulate(tmp_path, HEADER + pool + cpu_pod("p", spec="  nodeSelector: {example.com/tier: gold}\n"))
    assert doc["unschedulable"] == []
    assert set(pods_of(doc)) == {"ml/p"}


def test_a_pool_with_a_prefer_no_schedule_taint_is_avoided_while_another_fits(tmp_path: Path) -> None:
    soft = (
        CPU_POOL.replace("name: cpu}", "name: soft}").replace("  template:\n", "  weight: 100\n  template:\n")
        + "      taints: [{key: dedicated, value: batch, effect: PreferNoSchedule}]\n"
    )
    doc = simulate(tmp_path, HEADER + soft + CPU_POOL + cpu_pod("p"))
    assert pods_of(doc)["ml/p"]["nodePool"] == "cpu"


def test_pods_with_the_same_host_port_get_their_own_nodes(tmp_path: Path) -> None:
    text = HEADER + CPU_POOL
    for name in ("a", "b"):
        text += cpu_pod(name).replace(
            "      resources:", "      ports: [{containerPort: 80, hostPort: 8080}]\n      resources:"
        )
    doc = simulate(tmp_path, text)
    assert len(doc["nodeClaims"]) == 2


def test_min_domains_leaves_a_pod_pending_when_the_pool_offers_too_few_zones(tmp_path: Path) -> None:
    pool = (
        CPU_POOL
        + "        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]}\n"
    )
    spread = (
        "  topologySpreadConstraints:\n"
        "    - {maxSkew: 1, minDomains: 3, topologyKey: topology.kubernetes.io/zone,"
        " whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: w}}}\n"
    )
    text = HEADER + pool + "".join(cpu_pod(f"w{i}", labels="{app: w}", spec=spread) for i in range(3))
    doc = simulate(tmp_path, text)
    assert len(doc["unschedulable"]) == 1
    assert sorted({c["zone"] for c in doc["nodeClaims"]}) == ["us-east-1a", "us-east-1b"]


H100_AND_A100 = """\
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: h100}
spec:
  weight: 100
  limits: {nvidia.com/gpu: "8"}
  template:
    spec:
      nodeClassRef: {kind: AWSNodeClass, name: gpu}
      requirements:
        - {key: provisioner.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: provisioner.sh/gpu-name, operator: In, values: [h100]}
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: a100}
spec:
  weight: 10
  template:
    spec:
      nodeClassRef: {kind: AWSNodeClass, name: gpu}
      requirements:
        - {key: provisioner.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: provisioner.sh/gpu-name, operator: In, values: [a100]}
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
"""


def trainer(name: str, gpu_names: str, cpu: str) -> str:
    return f"""\
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: ml}}
spec:
  tolerations: [{{key: nvidia.com/gpu, operator: Exists}}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{{key: provisioner.sh/gpu-name, operator: In, values: {gpu_names}}}]
  containers:
    - name: c
      resources: {{requests: {{cpu: "{cpu}", memory: 64Gi, nvidia.com/gpu: "8"}}}}
"""


def test_a_pod_pinned_to_h100_is_not_left_pending_by_pods_that_could_use_a100(tmp_path: Path) -> None:
    text = HEADER + H100_AND_A100 + trainer("flex", "[h100, a100]", "16") + trainer("strict", "[h100]", "8")
    doc = simulate(tmp_path, text)
    assert doc["unschedulable"] == []
    assert pods_of(doc)["ml/strict"]["nodePool"] == "h100"
    assert pods_of(doc)["ml/flex"]["nodePool"] == "a100"


def test_explain_says_why_a_pod_ends_unschedulable_in_the_full_solve(tmp_path: Path) -> None:
    text = HEADER + H100_AND_A100 + trainer("strict-0", "[h100]", "8") + trainer("strict-1", "[h100]", "8")
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    result = cli("explain", path, "--pod", "ml/strict-1")
    assert result.returncode == 0, result.stderr
    full = result.stdout[result.stdout.index("In the full solve") :]
    assert "unschedulable" in full and "limit" in full and "ml/strict-0" in full


def test_a_zone_affine_group_follows_a_target_pinned_to_one_zone(tmp_path: Path) -> None:
    target = cpu_pod(
        "db", labels="{app: db}", spec="  nodeSelector: {topology.kubernetes.io/zone: us-east-1c}\n"
    )
    text = HEADER + CPU_POOL + target
    text += "".join(
        cpu_pod(
            f"web{i}", cpu="1500m", labels="{app: web}", spec=follows("db", "topology.kubernetes.io/zone")
        )
        for i in range(3)
    )
    doc = simulate(tmp_path, text)
    assert doc["unschedulable"] == []
    assert {c["zone"] for c in doc["nodeClaims"]} == {"us-east-1c"}
    assert len(doc["nodeClaims"]) >= 2, "the followers need more than the target's node"


def test_a_preferred_node_affinity_does_not_narrow_a_zone_spread(tmp_path: Path) -> None:
    spec = (
        "  affinity:\n    nodeAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n"
        "        - weight: 100\n          preference:\n            matchExpressions:\n"
        "              - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}\n"
        "  topologySpreadConstraints:\n"
        "    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,"
        " labelSelector: {matchLabels: {app: w}}}\n"
    )
    pool = CPU_POOL + (
        "        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b, us-east-1c]}\n"
    )
    doc = simulate(
        tmp_path, HEADER + pool + "".join(cpu_pod(f"w{i}", labels="{app: w}", spec=spec) for i in range(3))
    )
    assert doc["unschedulable"] == []
    zones = sorted(pods_of(doc)[f"ml/w{i}"]["zone"] for i in range(3))
    assert zones == ["us-east-1a", "us-east-1b", "us-east-1c"], "the spread counts every zone the pool offers"


def test_two_underused_nodes_of_one_type_are_not_swapped_for_one_of_that_type_one_is_deleted(
    tmp_path: Path,
) -> None:
    """Karpenter's multi-node rule: replacing nodes with one of the same type as one of them is a delete of
    the emptier one (its pods move), never a launch."""
    text = timeline.scenario(
        duration="2h",
        timeline="    - at: 20m\n      delete:\n        - {kind: Deployment, namespace: ml, name: big}\n",
    )
    text += CPU_POOL + (
        "        - {key: node.kubernetes.io/instance-type, operator: In, values: [m7i.large]}\n"
        "  disruption:\n    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 5m\n"
        '    budgets:\n      - nodes: "100%"\n'
    )
    for name, cpu in (("big", "1200m"), ("small", "500m")):
        text += timeline.workload("Deployment", name, count=2, gpus=0, cpu=cpu).replace(
            'memory: 8Gi, nvidia.com/gpu: "0"', "memory: 1Gi"
        )
    doc = timeline.run_json(timeline.write(tmp_path, text))
    assert len(doc["nodeClaims"]) == 2, "the two big pods needed a node each"
    (action,) = doc["actions"]
    assert action["replacement"] is None and action["replacementNodes"] == [], action
    survivors = [c for c in doc["nodeClaims"] if c["deletedAt"] is None]
    assert len(survivors) == 1
    assert sorted(p["pod"] for p in doc["placements"] if p["node"] == survivors[0]["name"]) == [
        "ml/small-0",
        "ml/small-1",
    ]


# Existing capacity, DaemonSets, pod order and capacity in flight (issue 30) ------------------------------

DEFAULT_POOL = CPU_POOL.replace("name: cpu}", "name: default}")


def bare_node(name: str, *, cpu: str, labels: str = "") -> str:
    """A Ready node no pool owns (a managed node group): no pool label, no claim."""
    return f"""\
---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}{labels}}}
status:
  allocatable: {{cpu: "{cpu}", memory: 10Gi, pods: "110"}}
  conditions: [{{type: Ready, status: "True"}}]
"""


def test_pods_go_to_an_existing_node_no_pool_owns(tmp_path: Path) -> None:
    """Karpenter's "should schedule (multiple) pods to an existing node unowned by Karpenter", with the
    pool named `default` (which gives every pod a pool list)."""
    text = HEADER + DEFAULT_POOL + bare_node("managed-1", cpu="10")
    text += "".join(pod(f"p{i}", requests="{cpu: 10m}") for i in range(3))
    doc = simulate(tmp_path, text)
    assert doc["nodeClaims"] == [], "no node is launched while the managed node has room"
    assert {p["pod"]: p["node"] for p in doc["placements"]} == {f"ml/p{i}": "managed-1" for i in range(3)}


def test_pods_pinned_to_each_zone_run_and_a_pod_that_repels_them_stays_pending(tmp_path: Path) -> None:
    """Karpenter's "should not violate pod anti-affinity on zone"."""
    pool = CPU_POOL + (
        "        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b, us-east-1c]}\n"
    )
    text = HEADER + pool
    for zone in ("a", "b", "c"):
        spec = f"  nodeSelector: {{topology.kubernetes.io/zone: us-east-1{zone}}}\n"
        text += cpu_pod(f"z{zone}", cpu="2", labels="{security: s2}", spec=spec)
    anti = (
        "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
        "        - {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {security: s2}}}\n"
    )
    text += cpu_pod("repels", cpu="1", spec=anti)
    doc = simulate(tmp_path, text)
    assert [u["pod"] for u in doc["unschedulable"]] == ["ml/repels"]
    placed = pods_of(doc)
    assert {z: placed[f"ml/z{z}"]["zone"] for z in "abc"} == {z: f"us-east-1{z}" for z in "abc"}


ZONE_A_DAEMONSET = """\
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: zonal, namespace: kube-system}
spec:
  template:
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}]
      containers:
        - {name: c, resources: {requests: {cpu: "100", memory: 100Gi}}}
"""


def test_a_daemonset_kept_to_another_zone_takes_nothing_from_an_existing_node(tmp_path: Path) -> None:
    """Karpenter's "should not subtract daemonset overhead that is not strictly compatible with an
    existing node": the node in zone b has exactly the pod's CPU free."""
    node = bare_node(
        "node-b", cpu="1", labels=", provisioner.sh/nodepool: cpu, topology.kubernetes.io/zone: us-east-1b"
    )
    text = HEADER + CPU_POOL + node + ZONE_A_DAEMONSET + pod("p", requests='{cpu: "1", memory: 1Gi}')
    doc = simulate(tmp_path, text)
    assert doc["nodeClaims"] == []
    assert doc["placements"] == [{"pod": "ml/p", "node": "node-b"}]


def test_a_node_launched_for_pods_still_on_their_way_receives_no_pods_from_consolidation(
    tmp_path: Path,
) -> None:
    """Karpenter's "won't delete node if it would require pods to schedule on an uninitialized node" and
    "should not schedule an additional node when receiving pending pods while consolidating": work arrives
    ten minutes after the first node settled; the node launched for it is not where the first node's pod
    goes, and no third node is launched."""
    later = timeline.workload("Deployment", "b", count=1, gpus=0, cpu="1200m").replace(
        'memory: 8Gi, nvidia.com/gpu: "0"', "memory: 1Gi"
    )
    steps = "    - at: 10m\n      apply:\n" + "".join(
        f"          {line}\n" if i else f"        - {line}\n" for i, line in enumerate(yaml_lines(later))
    )
    text = timeline.scenario(duration="40m", timeline=steps)
    text += CPU_POOL + (
        "        - {key: node.kubernetes.io/instance-type, operator: In, values: [m7i.large]}\n"
        "  disruption:\n    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 30s\n"
        '    budgets:\n      - nodes: "100%"\n'
    )
    text += timeline.workload("Deployment", "a", count=1, gpus=0, cpu="1200m").replace(
        'memory: 8Gi, nvidia.com/gpu: "0"', "memory: 1Gi"
    )
    doc = timeline.run_json(timeline.write(tmp_path, text))
    assert doc["actions"] == [], "neither node may go: each holds a pod the other has no room for"
    assert len(doc["nodeClaims"]) == 2
    assert sorted(c["pods"] for c in doc["nodeClaims"]) == [["ml/a-0"], ["ml/b-0"]]


def yaml_lines(manifest: str) -> list[str]:
    """A one-document manifest's lines, for a timeline step's list (the leading `---` dropped)."""
    return [line for line in manifest.splitlines() if line and line != "---"]


# minValues with any operator (Karpenter's instance selection suite) -------------------------------------

OD_POOL = """\
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
"""


def instance_cpus(claim: dict[str, Any]) -> set[str]:
    """The m7i sizes among a claim's options (the family's sizes differ by CPU count)."""
    return {t.split(".")[1] for t in claim["instanceTypeOptions"]}


def test_min_values_on_a_gt_requirement_spans_that_many_cpu_counts(tmp_path: Path) -> None:
    """Karpenter's "should schedule respecting the minValues in Gt operator"."""
    text = (
        HEADER
        + OD_POOL
        + (
            "        - {key: provisioner.sh/instance-family, operator: In, values: [m7i]}\n"
            "        - {key: provisioner.sh/instance-cpu, operator: Gt, values: ['2'], minValues: 3}\n"
        )
    )
    text += pod("p", requests='{cpu: "1"}')
    (claim,) = simulate(tmp_path, text)["nodeClaims"]
    assert claim["instanceType"] == "m7i.xlarge", "the cheapest type with more than 2 CPUs"
    assert len(instance_cpus(claim)) >= 3


def test_min_values_on_a_gt_requirement_the_types_cannot_span_leaves_the_pod_pending(tmp_path: Path) -> None:
    """Karpenter's "scheduler should fail if the minValues in Gt operator is not satisfied": m7i has three
    sizes over 60 CPUs."""
    text = (
        HEADER
        + OD_POOL
        + (
            "        - {key: provisioner.sh/instance-family, operator: In, values: [m7i]}\n"
            "        - {key: provisioner.sh/instance-cpu, operator: Gt, values: ['60'], minValues: 4}\n"
        )
    )
    text += pod("p", requests='{cpu: "1"}')
    doc = simulate(tmp_path, text)
    assert doc["nodeClaims"] == []
    assert "minValues 4" in json.dumps(reasons(doc, "ml/p"))


def test_the_largest_min_values_of_in_and_not_in_on_one_key_applies(tmp_path: Path) -> None:
    """Karpenter's "should schedule considering the max of the minValues of In and NotIn operators"."""
    text = (
        HEADER
        + OD_POOL
        + (
            "        - {key: provisioner.sh/instance-family, operator: In, values: [m7i, c7i, r7i], minValues: 1}\n"
            "        - {key: provisioner.sh/instance-family, operator: NotIn, values: [r7i], minValues: 2}\n"
        )
    )
    text += pod("p", requests='{cpu: "1"}')
    (claim,) = simulate(tmp_path, text)["nodeClaims"]
    assert {t.split(".")[0] for t in claim["instanceTypeOptions"]} == {"m7i", "c7i"}
