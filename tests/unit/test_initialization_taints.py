"""A NodeClaim is initialized only once its Node lost the taints a starting node carries (Karpenter's
known ephemeral taints): initialized, its taints count as they are, so a node still `not-ready` would
hold no pod and the pods launched for it would be launched for again."""

from typing import Any

from provisioner.controllers.lifecycle.initialization import missing
from provisioner.state.objects import Node
from testkit.builders.nodes import node_claim


def _ready_node(*taints: dict[str, Any]) -> Node:
    return Node.from_dict(
        {
            "metadata": {"name": "n"},
            "spec": {"taints": list(taints)},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "4"}},
        }
    )


def test_a_ready_node_is_not_initialized_while_a_known_ephemeral_taint_is_on_it() -> None:
    claim = node_claim("c", ["m.xlarge"])
    assert missing(claim, _ready_node()) == []
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    uninitialized = {
        "key": "node.cloudprovider.kubernetes.io/uninitialized",
        "value": "true",
        "effect": "NoSchedule",
    }
    assert missing(claim, _ready_node(not_ready, uninitialized)) == [
        "known ephemeral taints still present: node.cloudprovider.kubernetes.io/uninitialized, "
        "node.kubernetes.io/not-ready"
    ]


def test_a_taint_of_the_pools_own_does_not_hold_initialization() -> None:
    claim = node_claim("c", ["m.xlarge"])
    assert missing(claim, _ready_node({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"})) == []
