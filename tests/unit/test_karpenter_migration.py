"""A Karpenter fleet, imported, routes pods where Karpenter would, and the import says what changed meaning.

One test per pattern the public `examples/v1` manifests of aws/karpenter-provider-aws use (CPU limits,
custom AMIs and user data, Bottlerocket and Windows families, instance category/generation, local NVMe,
Gt on CPU and memory, node lifetime, minValues, several architectures, several EBS volumes, spot), each
written here in our own words rather than copied.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from providers.aws import karpenter_names
from provisioner.api import documents, karpenter, labels
from provisioner.cli.main import app
from provisioner.cloudprovider import catalog

AWS_TYPES = sorted(t.name for t in catalog.load("aws"))

NODECLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: nodes}
spec:
  role: NodeRole
  subnetSelectorTerms: [{tags: {team: infra}}]
  securityGroupSelectorTerms: [{tags: {team: infra}}]
  amiSelectorTerms: [{alias: al2023@latest}]
"""


def karpenter_pool(name: str, *, requirements: Sequence[dict[str, Any]] = (), **spec: Any) -> str:
    template_spec = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "nodes"},
        "requirements": list(requirements),
        **spec.pop("template_spec", {}),
    }
    doc = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": template_spec}, **spec},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def convert(*texts: str) -> karpenter.Conversion:
    text = "---\n".join(texts)
    return karpenter.convert_documents(
        documents.parse_yaml_documents(text, source="in.yaml"), instance_types={"aws": AWS_TYPES}
    )


def pool_of(conversion: karpenter.Conversion, name: str) -> dict[str, Any]:
    (found,) = [o for o in conversion.objects if o["kind"] == "NodePool" and o["metadata"]["name"] == name]
    return found


def requirements_of(pool: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in pool["spec"]["template"]["spec"]["requirements"]}


def changed(conversion: karpenter.Conversion) -> list[str]:
    return [str(n) for n in conversion.notes if n.section == "changed"]


def req(key: str, operator: str, *values: Any, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = [str(v) for v in values]
    return {**out, **extra}


# ------------------------------------------------------------------------------------------- routing


def test_a_gpu_pod_goes_to_the_weighted_gpu_pool_not_to_the_pool_named_default(tmp_path: Path) -> None:
    source = tmp_path / "fleet.yaml"
    source.write_text(
        "---\n".join(
            [
                karpenter_pool(
                    "default",
                    weight=0,
                    requirements=[req(karpenter_names.CATEGORY, "In", "c", "m", "r", "g")],
                ),
                karpenter_pool(
                    "gpu",
                    weight=20,
                    requirements=[req("karpenter.k8s.aws/instance-gpu-name", "In", "a100", "h100")],
                ),
                NODECLASS,
            ]
        )
    )
    imported = CliRunner().invoke(
        app, ["templates", "import-karpenter", str(source), "--write", str(tmp_path / "out")]
    )
    assert imported.exit_code == 0, imported.stderr
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        "apiVersion: provisioner.sh/v1alpha1\nkind: Scenario\nmetadata: {name: t}\n"
        "spec: {catalog: aws, region: us-east-1}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: train, namespace: ml}\nspec:\n  containers:\n"
        "    - name: c\n      image: trainer\n"
        "      resources: {requests: {nvidia.com/gpu: 4}, limits: {nvidia.com/gpu: 4}}\n"
    )
    result = CliRunner().invoke(
        app, ["simulate", str(scenario), str(tmp_path / "out" / "fleet.yaml"), "-o", "json"]
    )
    assert result.exit_code == 0, result.stderr
    claims = json.loads(result.stdout)["nodeClaims"]
    assert [(c["nodePool"], c["gpu"]["name"]) for c in claims] == [("gpu", "a100")]
    assert "annotated provisioner.sh/default-pool" in imported.stderr


def test_a_pool_named_default_is_annotated_out_of_the_default_role() -> None:
    conversion = convert(karpenter_pool("default"), NODECLASS)
    pool = pool_of(conversion, "default")
    assert pool["metadata"]["annotations"] == {labels.DEFAULT_POOL: "false"}
    assert any("takes every pod that names no pool list" in line for line in changed(conversion))


def test_weights_carry_and_a_zero_weight_becomes_none() -> None:
    conversion = convert(karpenter_pool("a", weight=0), karpenter_pool("b", weight=50), NODECLASS)
    assert "weight" not in pool_of(conversion, "a")["spec"]
    assert pool_of(conversion, "b")["spec"]["weight"] == 50
    assert any("weight 0 written as no weight" in line for line in changed(conversion))


def test_pools_sharing_a_weight_are_flagged_for_checking() -> None:
    conversion = convert(karpenter_pool("a", weight=10), karpenter_pool("b", weight=10), NODECLASS)
    checks = [str(n) for n in conversion.notes if n.section == "check"]
    assert any("pools a, b share weight 10" in line for line in checks)


# ------------------------------------------------------------------------------ examples/v1 patterns


def test_category_and_generation_become_the_families_they_select() -> None:
    conversion = convert(
        karpenter_pool(
            "general",
            requirements=[
                req(karpenter_names.CATEGORY, "In", "c", "m"),
                req(karpenter_names.GENERATION, "Gt", 5),
            ],
        ),
        NODECLASS,
    )
    families = requirements_of(pool_of(conversion, "general"))[labels.INSTANCE_FAMILY]
    assert families == {
        "key": labels.INSTANCE_FAMILY,
        "operator": "In",
        "values": ["c6i", "c7i", "m6i", "m7i"],
    }
    assert conversion.problems == []


def test_instance_size_narrows_to_instance_types() -> None:
    conversion = convert(
        karpenter_pool(
            "big",
            requirements=[
                req(karpenter_names.CATEGORY, "In", "p"),
                req(karpenter_names.SIZE, "In", "48xlarge"),
            ],
        ),
        NODECLASS,
    )
    types = requirements_of(pool_of(conversion, "big"))[labels.INSTANCE_TYPE]
    # Every 48xlarge of the P category the catalog holds (H100, H200, B200 machines), and nothing else.
    assert "p5.48xlarge" in types["values"]
    assert all(v.startswith("p") and v.endswith(".48xlarge") for v in types["values"])


def test_min_values_on_a_category_cannot_carry_and_says_so_while_family_min_values_carry() -> None:
    conversion = convert(
        karpenter_pool(
            "spot",
            requirements=[
                req("karpenter.sh/capacity-type", "In", "spot"),
                req(karpenter_names.CATEGORY, "In", "c", "m", "r", minValues=2),
                req("karpenter.k8s.aws/instance-family", "Exists", minValues=5),
                req("node.kubernetes.io/instance-type", "Exists", minValues=2),
            ],
        ),
        NODECLASS,
    )
    reqs = requirements_of(pool_of(conversion, "spot"))
    assert reqs[labels.INSTANCE_TYPE]["minValues"] == 2
    families = [
        r
        for r in pool_of(conversion, "spot")["spec"]["template"]["spec"]["requirements"]
        if r["key"] == labels.INSTANCE_FAMILY
    ]
    assert {"key": labels.INSTANCE_FAMILY, "operator": "Exists", "minValues": 5} in families
    assert [p.path for p in conversion.problems] == ["spec.template.spec.requirements[1].minValues"]


def test_a_requirement_nothing_in_the_catalog_meets_is_dropped_with_the_reason() -> None:
    conversion = convert(
        karpenter_pool("odd", requirements=[req(karpenter_names.CATEGORY, "In", "zz")]), NODECLASS
    )
    (problem,) = conversion.problems
    assert "no families of the catalog match" in problem.message


def test_local_nvme_and_instance_store_policy_are_dropped_with_warnings() -> None:
    node_class = NODECLASS.replace("spec:\n", "spec:\n  instanceStorePolicy: RAID0\n")
    conversion = convert(
        karpenter_pool("nvme", requirements=[req("karpenter.k8s.aws/instance-local-nvme", "Gt", 100)]),
        node_class,
    )
    assert sorted(p.path for p in conversion.problems) == [
        "spec.instanceStorePolicy",
        "spec.template.spec.requirements[0].key",
    ]


def test_cpu_and_memory_bounds_carry_as_our_labels() -> None:
    conversion = convert(
        karpenter_pool(
            "large",
            requirements=[
                req("karpenter.k8s.aws/instance-cpu", "Gt", 3),
                req("karpenter.k8s.aws/instance-memory", "Gt", 8191),
            ],
        ),
        NODECLASS,
    )
    reqs = requirements_of(pool_of(conversion, "large"))
    assert reqs[labels.INSTANCE_CPU]["values"] == ["3"]
    assert reqs[labels.INSTANCE_MEMORY]["values"] == ["8191"]


def test_cpu_limits_consolidation_and_node_lifetime_carry() -> None:
    conversion = convert(
        karpenter_pool(
            "capped",
            limits={"cpu": 100},
            disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "60s"},
            template_spec={"expireAfter": "168h", "terminationGracePeriod": "24h"},
        ),
        NODECLASS,
    )
    spec = pool_of(conversion, "capped")["spec"]
    assert spec["limits"] == {"cpu": 100}
    assert spec["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "60s"}
    assert (spec["template"]["spec"]["expireAfter"], spec["template"]["spec"]["terminationGracePeriod"]) == (
        "168h",
        "24h",
    )
    assert documents.validate_documents(
        documents.parse_yaml_documents(
            "---\n".join(yaml.safe_dump(o) for o in conversion.objects), source="x"
        )
    ).ok


@pytest.mark.parametrize(
    "ami",
    [
        pytest.param(
            {"amiFamily": "AL2", "amiSelectorTerms": [{"id": "ami-0123456789abcdef0"}]}, id="custom-ami-id"
        ),
        pytest.param({"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]}, id="bottlerocket-alias"),
        pytest.param(
            {"amiFamily": "Custom", "amiSelectorTerms": [{"tags": {"image": "ours"}}]}, id="custom-family"
        ),
        pytest.param(
            {"amiFamily": "Custom", "amiSelectorTerms": [{"alias": "al2023@v20240807"}]},
            id="custom-with-alias",
        ),
    ],
)
def test_ami_selection_carries(ami: dict[str, Any]) -> None:
    data = yaml.safe_load(NODECLASS)
    data["spec"].update(ami)
    conversion = convert(yaml.safe_dump(data))
    (node_class,) = conversion.objects
    assert {k: node_class["spec"][k] for k in ami} == ami
    assert conversion.problems == []


@pytest.mark.parametrize(
    "user_data",
    [
        pytest.param(
            'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n--B\n', id="al2-mime"
        ),
        pytest.param("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n", id="al2023-nodeadm"),
        pytest.param("[settings.kubernetes]\nmax-pods = 30\n", id="bottlerocket-toml"),
        pytest.param("New-Item -Path 'C:\\temp' -ItemType Directory\n", id="windows-powershell"),
    ],
)
def test_user_data_is_carried_verbatim(user_data: str) -> None:
    data = yaml.safe_load(NODECLASS)
    data["spec"]["userData"] = user_data
    (node_class,) = convert(yaml.safe_dump(data)).objects
    assert node_class["spec"]["userData"] == user_data


def test_a_windows_pool_whose_ref_spells_the_group_with_its_version_converts() -> None:
    pool = yaml.safe_load(karpenter_pool("win", requirements=[req(labels.OS, "In", "windows")]))
    pool["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "karpenter.k8s.aws/v1"
    data = yaml.safe_load(NODECLASS)
    data["spec"]["amiFamily"] = "Windows2022"
    conversion = convert(yaml.safe_dump(pool), yaml.safe_dump(data))
    assert conversion.ok
    ref = pool_of(conversion, "win")["spec"]["template"]["spec"]["nodeClassRef"]
    assert ref == {"group": "provisioner.sh", "kind": "AWSNodeClass", "name": "nodes"}
    assert any("Windows nodes are not launched here" in line for line in changed(conversion))


def test_one_pool_per_architecture_keeps_its_arch() -> None:
    conversion = convert(
        karpenter_pool("amd", requirements=[req(labels.ARCH, "In", "amd64")]),
        karpenter_pool("arm", requirements=[req(labels.ARCH, "In", "arm64")]),
        NODECLASS,
    )
    assert [requirements_of(pool_of(conversion, n))[labels.ARCH]["values"] for n in ("amd", "arm")] == [
        ["amd64"],
        ["arm64"],
    ]


def test_several_ebs_volumes_carry() -> None:
    data = yaml.safe_load(NODECLASS)
    volumes = [
        {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "volumeType": "gp3", "encrypted": True}},
        {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "iops": 3000}},
    ]
    data["spec"]["blockDeviceMappings"] = volumes
    (node_class,) = convert(yaml.safe_dump(data)).objects
    assert node_class["spec"]["blockDeviceMappings"] == volumes


def test_kubelet_settings_are_dropped_one_warning_each_and_the_report_says_what_to_check() -> None:
    data = yaml.safe_load(NODECLASS)
    data["spec"]["kubelet"] = {"maxPods": 110, "systemReserved": {"cpu": "100m"}}
    conversion = convert(karpenter_pool("p"), yaml.safe_dump(data))
    assert sorted(p.path for p in conversion.problems) == [
        "spec.kubelet.maxPods",
        "spec.kubelet.systemReserved",
    ]
    checks = [str(n) for n in conversion.notes if n.section == "check"]
    assert any("max pods and reserved resources" in line for line in checks)


def test_spot_pools_are_flagged_for_spot_to_spot_consolidation() -> None:
    conversion = convert(
        karpenter_pool("spot", requirements=[req("karpenter.sh/capacity-type", "In", "spot")]),
        karpenter_pool("od", requirements=[req("karpenter.sh/capacity-type", "In", "on-demand")]),
        NODECLASS,
    )
    checks = [str(n) for n in conversion.notes if n.section == "check"]
    assert any(
        "spot-to-spot consolidation is on here" in line and "nodes of spot may" in line for line in checks
    )
