"""User data per AMI family, pure."""

from __future__ import annotations

from typing import Any

import pytest

from providers.aws import bootstrap
from testkit.providers.aws import world

CLUSTER = bootstrap.ClusterInfo(
    name="prod", endpoint="https://api.example", ca_bundle="Q0E=", service_cidr="10.100.0.0/16"
)


@pytest.mark.parametrize(
    ("spec", "family"),
    [
        ({}, "Custom"),
        ({"amiSelectorTerms": [{"alias": "al2023@latest"}]}, "AL2023"),
        ({"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]}, "Bottlerocket"),
        ({"amiSelectorTerms": [{"alias": "al2023@latest"}], "amiFamily": "AL2"}, "AL2"),
    ],
    ids=["tags-custom", "al2023-alias", "bottlerocket-alias", "explicit-family-wins"],
)
def test_the_family_comes_from_ami_family_then_the_alias(spec: dict[str, Any], family: str) -> None:
    assert bootstrap.family_of(world.node_class(**spec)) == family


def test_custom_user_data_is_left_alone() -> None:
    assert bootstrap.user_data("Custom", cluster=CLUSTER, custom="#!/bin/sh\ntrue\n") == "#!/bin/sh\ntrue\n"


def test_al2_runs_the_node_class_script_then_bootstrap_sh() -> None:
    text = bootstrap.user_data("AL2", cluster=CLUSTER, custom="#!/bin/bash\necho first\n")

    assert text is not None
    assert text.index("echo first") < text.index("/etc/eks/bootstrap.sh 'prod'")
    assert "--b64-cluster-ca 'Q0E='" in text
    assert "--register-with-taints=provisioner.sh/unregistered:NoExecute" in text


def test_bottlerocket_settings_name_the_cluster_and_the_registration_taint() -> None:
    text = bootstrap.user_data("Bottlerocket", cluster=CLUSTER, custom=None)

    assert text is not None
    assert 'api-server = "https://api.example"' in text
    assert '"provisioner.sh/unregistered" = [":NoExecute"]' in text


def test_a_node_config_from_the_node_class_is_kept_as_a_node_config_part() -> None:
    mine = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 50\n"

    text = bootstrap.user_data("AL2023", cluster=CLUSTER, custom=mine)

    assert text is not None
    assert text.count("Content-Type: application/node.eks.aws") == 2
    assert "maxPods: 50" in text


@pytest.mark.parametrize(
    ("family", "line"),
    [
        ("AL2023", "      - --node-labels=nvidia.com/mig.config=all-1g.10gb"),
        (
            "AL2",
            "--register-with-taints=provisioner.sh/unregistered:NoExecute "
            "--node-labels=nvidia.com/mig.config=all-1g.10gb'",
        ),
        ("Bottlerocket", '[settings.kubernetes.node-labels]\n"nvidia.com/mig.config" = "all-1g.10gb"'),
    ],
)
def test_node_labels_are_the_kubelets_own_from_its_first_moment(family: str, line: str) -> None:
    text = bootstrap.user_data(
        family, cluster=CLUSTER, custom=None, node_labels={"nvidia.com/mig.config": "all-1g.10gb"}
    )
    assert text is not None and line in text
    assert "node-labels" not in (bootstrap.user_data(family, cluster=CLUSTER, custom=None) or "")
