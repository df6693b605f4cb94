"""The API models: Karpenter-compatible field names, defaults, and the checks every object gets."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from providers.aws.model import AWSNodeClass
from providers.gcp.model import GCPNodeClass
from provisioner.api import NodeClaim, NodePool, durations, labels
from provisioner.api.common import (
    FieldError,
    Operator,
    Requirement,
    check_label_key,
    check_label_value,
    requirement_conflicts,
)
from provisioner.api.labels import ZONE
from provisioner.api.nodepool import Budget


def node_pool(**spec: Any) -> dict[str, Any]:
    """A minimal valid NodePool document; `spec` keys override (camelCase, as in YAML)."""
    template_spec = {
        "nodeClassRef": {"group": "provisioner.sh", "kind": "AWSNodeClass", "name": "default"},
        **spec.pop("template_spec", {}),
    }
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": spec.pop("name", "default")},
        "spec": {"template": {"spec": template_spec}, **spec},
    }


def requirement(key: str, operator: str, *values: str, **extra: Any) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values), **extra}


def errors_of(model: type[BaseModel], data: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    with pytest.raises(ValidationError) as err:
        model.model_validate(data)
    out = []
    for e in err.value.errors():
        ctx = (e.get("ctx") or {}).get("error")
        extra = ctx.path if isinstance(ctx, FieldError) else ()
        out.append(((*e["loc"], *extra), e["msg"]))
    return out


def test_a_minimal_node_pool_gets_karpenters_defaults() -> None:
    pool = NodePool.model_validate(node_pool())
    assert pool.name == "default"
    assert pool.weight == 0
    assert pool.spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert pool.spec.disruption.consolidate_after == "0s"
    assert [b.nodes for b in pool.spec.disruption.budgets] == ["10%"]
    assert pool.spec.template.spec.expire_after == "720h"
    assert pool.expire_after() == timedelta(hours=720)


def test_a_full_node_pool_round_trips_through_its_yaml_field_names() -> None:
    data = node_pool(
        weight=10,
        limits={"cpu": "100", "nvidia.com/gpu": 8},
        disruption={
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": "5m",
            "budgets": [
                {"nodes": "1", "schedule": "@daily", "duration": "1h", "reasons": ["Empty", "Drifted"]}
            ],
        },
        template_spec={
            "requirements": [requirement(labels.GPU_NAME, "In", "h100", "a100", minValues=2)],
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "example.com/not-ready", "value": "x", "effect": "NoExecute"}],
            "expireAfter": "Never",
            "terminationGracePeriod": "48h",
        },
    )
    pool = NodePool.model_validate(data)
    dumped = pool.to_dict()
    assert dumped["spec"]["template"]["spec"] == {
        **data["spec"]["template"]["spec"],
        "nodeClassRef": {"group": "provisioner.sh", "kind": "AWSNodeClass", "name": "default"},
    }
    assert dumped["spec"]["disruption"] == {**data["spec"]["disruption"], "minSavingsPerPodHour": "0"}
    assert (dumped["spec"]["limits"], dumped["spec"]["weight"]) == (data["spec"]["limits"], 10)
    assert NodePool.model_validate(dumped) == pool
    assert pool.expire_after() is None
    assert pool.spec.limits_base_units() == {"cpu": 100_000, "nvidia.com/gpu": 8}
    assert pool.spec.template.spec.requirements[0].min_values == 2


def test_karpenter_field_spellings_are_kept() -> None:
    node_class = AWSNodeClass.model_validate(
        {
            "metadata": {"name": "x"},
            "spec": {
                "role": "r",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"id": "subnet-1"}],
                "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
                "associatePublicIPAddress": False,
                "blockDeviceMappings": [
                    {
                        "deviceName": "/dev/xvda",
                        "ebs": {"kmsKeyID": "k", "snapshotID": "s", "volumeSize": "20Gi"},
                    }
                ],
                "metadataOptions": {"httpProtocolIPv6": "enabled"},
            },
        }
    )
    dumped = node_class.to_dict()["spec"]
    assert dumped["associatePublicIPAddress"] is False
    assert dumped["blockDeviceMappings"][0]["ebs"]["kmsKeyID"] == "k"
    assert dumped["metadataOptions"]["httpProtocolIPv6"] == "enabled"
    claim = NodeClaim.model_validate(
        {
            "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"kind": "AWSNodeClass", "name": "x"}},
            "status": {"providerID": "aws:///us-east-1a/i-1", "imageID": "ami-1", "nodeName": "n"},
        }
    )
    assert claim.status.provider_id == "aws:///us-east-1a/i-1"
    assert claim.to_dict()["status"]["imageID"] == "ami-1"


@pytest.mark.parametrize(
    ("req", "path", "message"),
    [
        pytest.param(requirement("a", "In"), ("values",), "needs at least one value", id="in-without-values"),
        pytest.param(
            requirement("a", "Exists", "x"), ("values",), "takes no values", id="exists-with-values"
        ),
        pytest.param(
            requirement("a", "Gt", "1", "2"), ("values",), "exactly one integer", id="gt-two-values"
        ),
        pytest.param(
            requirement("a", "Lt", "x"), ("values", 0), "takes an integer value", id="lt-not-integer"
        ),
        pytest.param(
            requirement("a", "DoesNotExist", minValues=1),
            ("minValues",),
            "not allowed with operator DoesNotExist",
            id="minvalues-does-not-exist",
        ),
        pytest.param(
            requirement("a", "In", "x", minValues=2),
            ("minValues",),
            "more than the 1 values",
            id="minvalues-too-many",
        ),
    ],
)
def test_requirement_errors_name_the_field_inside_the_requirement(
    req: dict[str, Any], path: tuple[str | int, ...], message: str
) -> None:
    ((loc, msg),) = errors_of(Requirement, req)
    assert loc == path
    assert message in msg


@pytest.mark.parametrize(
    ("reqs", "conflict"),
    [
        pytest.param([("In", "a"), ("NotIn", "a")], True, id="in-and-notin-same-value"),
        pytest.param([("In", "a", "b"), ("NotIn", "a")], False, id="in-leaves-a-value"),
        pytest.param([("In", "a"), ("In", "b")], True, id="disjoint-ins"),
        pytest.param([("Exists",), ("DoesNotExist",)], True, id="exists-and-not"),
        pytest.param([("Gt", "4"), ("Lt", "5")], True, id="no-integer-between"),
        pytest.param([("Gt", "4"), ("Lt", "6")], False, id="five-fits"),
        pytest.param([("In", "2", "8"), ("Gt", "4")], False, id="in-filtered-by-gt"),
        pytest.param([("In", "2"), ("Gt", "4")], True, id="in-below-gt"),
    ],
)
def test_contradictory_requirements_are_found_per_key(reqs: list[tuple[str, ...]], conflict: bool) -> None:
    parsed = [Requirement(key="k", operator=Operator(op), values=list(values)) for op, *values in reqs]
    assert bool(requirement_conflicts(parsed)) is conflict


def test_a_contradiction_points_at_the_requirement_that_emptied_the_set() -> None:
    data = node_pool(
        template_spec={
            "requirements": [
                requirement(labels.CAPACITY_TYPE, "In", "spot"),
                requirement(labels.ARCH, "In", "amd64"),
                requirement(labels.CAPACITY_TYPE, "NotIn", "spot"),
            ]
        }
    )
    ((loc, msg),) = errors_of(NodePool, data)
    assert loc == ("spec", "template", "spec", "requirements", 2)
    assert "contradictory requirements: provisioner.sh/capacity-type" in msg


@pytest.mark.parametrize(
    ("spec", "path", "message"),
    [
        pytest.param({"weight": 0}, ("spec", "weight"), "greater than or equal to 1", id="weight-0"),
        pytest.param({"weight": 101}, ("spec", "weight"), "less than or equal to 100", id="weight-101"),
        pytest.param(
            {"limits": {"memory": "-1Gi"}}, ("spec", "limits", "memory"), "negative", id="negative-limit"
        ),
        pytest.param(
            {"limits": {"cpu": "lots"}}, ("spec", "limits", "cpu"), "not a Kubernetes quantity", id="nan"
        ),
        pytest.param(
            {"disruption": {"budgets": [{"nodes": "101%"}]}},
            ("spec", "disruption", "budgets", 0, "nodes"),
            "not a node count or percent",
            id="budget-over-100",
        ),
        pytest.param(
            {"disruption": {"budgets": [{"nodes": "1", "schedule": "* * *"}]}},
            ("spec", "disruption", "budgets", 0, "schedule"),
            "not a cron schedule",
            id="bad-cron",
        ),
        pytest.param(
            {"disruption": {"budgets": [{"nodes": "1", "schedule": "@daily"}]}},
            ("spec", "disruption", "budgets", 0, "duration"),
            "schedule and duration must be given together",
            id="schedule-without-duration",
        ),
        pytest.param(
            {"disruption": {"consolidateAfter": "1d"}},
            ("spec", "disruption", "consolidateAfter"),
            "is not a duration",
            id="days-are-not-go-durations",
        ),
        pytest.param(
            {"template_spec": {"terminationGracePeriod": "Never"}},
            ("spec", "template", "spec", "terminationGracePeriod"),
            "'Never' is not allowed here",
            id="grace-period-never",
        ),
        pytest.param(
            {"template_spec": {"nodeClassRef": {"kind": "EC2NodeClass", "name": "x"}}},
            ("spec", "template", "spec", "nodeClassRef", "kind"),
            "kind 'EC2NodeClass' is not known; allowed: AWSNodeClass, GCPNodeClass",
            id="unknown-node-class-kind",
        ),
        pytest.param(
            {
                "template_spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "AWSNodeClass", "name": "x"}
                }
            },
            ("spec", "template", "spec", "nodeClassRef", "group"),
            "group 'karpenter.k8s.aws' is not known",
            id="unknown-node-class-group",
        ),
        pytest.param(
            {
                "template_spec": {
                    "requirements": [requirement(labels.CAPACITY_TYPE, "In", "spot", "preemptible")]
                }
            },
            ("spec", "template", "spec", "requirements", 0, "values", 1),
            "unknown capacity type 'preemptible'",
            id="unknown-capacity-type",
        ),
        pytest.param(
            {"replicas": 3}, ("spec", "replicas"), "Extra inputs are not permitted", id="unknown-field"
        ),
    ],
)
def test_node_pool_errors_are_located_at_the_field(
    spec: dict[str, Any],
    path: tuple[str | int, ...],
    message: str,
) -> None:
    ((loc, msg),) = errors_of(NodePool, node_pool(**spec))
    assert loc == path
    assert message in msg


def test_restricted_labels_may_not_be_set_in_the_template() -> None:
    data = node_pool()
    data["spec"]["template"]["metadata"] = {"labels": {labels.NODEPOOL: "x"}}
    ((loc, msg),) = errors_of(NodePool, data)
    assert loc == ("spec", "template", "metadata", "labels", labels.NODEPOOL)
    assert "set by the provisioner" in msg


@pytest.mark.parametrize(
    ("nodes", "total", "allowed"),
    [("10%", 10, 1), ("10%", 11, 2), ("0", 50, 0), ("3", 2, 3), ("100%", 7, 7), ("0%", 7, 0)],
)
def test_budget_percent_rounds_up_as_karpenter_does(nodes: str, total: int, allowed: int) -> None:
    assert Budget(nodes=nodes).max_nodes(total) == allowed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("1h30m", timedelta(minutes=90)),
        ("720h", timedelta(days=30)),
        ("Never", None),
    ],
)
def test_durations_are_written_as_karpenter_writes_them(text: str, expected: timedelta | None) -> None:
    assert durations.parse_duration(text) == expected


def test_remembered_durations_answer_as_the_first_time_and_refuse_bad_input_every_time() -> None:
    # parse_duration remembers strings; the answer for the flag and for a bad string must not leak.
    assert durations.parse_duration("Never") is None
    with pytest.raises(durations.DurationError, match="'Never' is not allowed"):
        durations.parse_duration("Never", allow_never=False)
    for _ in range(2):
        assert durations.parse_duration(" 15m ") == timedelta(minutes=15)
        with pytest.raises(durations.DurationError, match="'15 minutes' is not a duration"):
            durations.parse_duration("15 minutes")
    not_a_string: Any = 0
    assert durations.parse_duration(not_a_string) == timedelta(0), "not a string: parsed as its text"


def test_remembered_label_checks_refuse_a_bad_key_or_value_every_time() -> None:
    for _ in range(2):
        assert check_label_key("team.example.com/app") == "team.example.com/app"
        with pytest.raises(ValueError, match="name part must be 1-63 characters"):
            check_label_key("team.example.com/-app")
        assert check_label_value("web-1") == "web-1"
        with pytest.raises(ValueError, match="is not a valid label value"):
            check_label_value("web 1")


def test_aws_node_class_needs_exactly_one_identity_and_no_reserved_tags() -> None:
    base = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"k": "v"}}],
        "securityGroupSelectorTerms": [{"id": "sg-1"}],
    }
    both = errors_of(
        AWSNodeClass, {"metadata": {"name": "x"}, "spec": {**base, "role": "r", "instanceProfile": "p"}}
    )
    assert both[0][0] == ("spec", "instanceProfile")
    tags = errors_of(
        AWSNodeClass,
        {"metadata": {"name": "x"}, "spec": {**base, "role": "r", "tags": {"provisioner.sh/x": "1"}}},
    )
    assert tags[0][0] == ("spec", "tags", "provisioner.sh/x")
    term = errors_of(
        AWSNodeClass, {"metadata": {"name": "x"}, "spec": {**base, "role": "r", "subnetSelectorTerms": [{}]}}
    )
    assert term[0][0] == ("spec", "subnetSelectorTerms", 0)


def test_gcp_node_class_needs_a_project_and_an_image() -> None:
    errors = errors_of(GCPNodeClass, {"metadata": {"name": "g"}, "spec": {}})
    assert sorted(loc for loc, _ in errors) == [("spec", "image"), ("spec", "project")]
    ok = GCPNodeClass.model_validate(
        {"metadata": {"name": "g"}, "spec": {"project": "p", "image": "projects/p/global/images/family/f"}}
    )
    assert (ok.spec.network, ok.spec.boot_disk.size_gb, ok.spec.boot_disk.type) == (
        "default",
        100,
        "pd-balanced",
    )


def _claim_with(*requirements: dict[str, Any]) -> NodeClaim:
    return NodeClaim.model_validate(
        {
            "metadata": {"name": "c"},
            "spec": {
                "nodeClassRef": {"kind": "AWSNodeClass", "name": "d"},
                "requirements": list(requirements),
            },
        }
    )


@pytest.mark.parametrize(
    ("requirements", "admitted", "refused"),
    [
        pytest.param([], ["us-east-1a", "anything"], [], id="unconstrained"),
        pytest.param(
            [{"key": ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b"]}],
            ["us-east-1a"],
            ["us-east-1c"],
            id="in",
        ),
        pytest.param(
            [
                {"key": ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b"]},
                {"key": ZONE, "operator": "NotIn", "values": ["us-east-1a"]},
            ],
            ["us-east-1b"],
            ["us-east-1a"],
            id="in-minus-notin",
        ),
        pytest.param([{"key": ZONE, "operator": "DoesNotExist"}], [], ["us-east-1a"], id="does-not-exist"),
    ],
)
def test_a_claim_admits_exactly_the_values_its_requirements_allow(
    requirements: list[dict[str, Any]],
    admitted: list[str],
    refused: list[str],
) -> None:
    claim = _claim_with(*requirements)
    assert all(claim.admits(ZONE, v) for v in admitted)
    assert not any(claim.admits(ZONE, v) for v in refused)
