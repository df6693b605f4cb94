"""The Watch a controller reads its changes through: the keys written since its last take, by kind, and
only those of the pools it serves when it is given a predicate on pool names (a replica serving a shard)."""

from __future__ import annotations

from typing import Any

from provisioner.api import labels as wk
from provisioner.controllers.watch import FIRST, Watch
from provisioner.state import ClusterState
from testkit.builders import node_claim, node_pool, pod_manifest


def node_doc(name: str, pool: str | None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {wk.NODEPOOL: pool} if pool else {}}}


def test_the_first_take_says_everything_then_only_what_was_written() -> None:
    state = ClusterState()
    state.upsert("Node", node_doc("n1", "a"))
    watch = Watch(state, ("Node", "Pod"))

    assert watch.take() == {"Node": FIRST, "Pod": FIRST}
    assert watch.take() == {}
    state.upsert("Pod", pod_manifest("p"))
    state.remove("Node", "n1")
    assert watch.take() == {"Pod": {"default/p"}, "Node": {"n1"}}
    assert watch.take() == {}


def test_a_watch_scoped_to_some_pools_hands_out_only_their_claims_nodes_and_pools() -> None:
    state = ClusterState()
    watch = Watch(state, ("NodeClaim", "Node", "NodePool", "Pod"), owns=lambda pool: pool == "a")
    watch.take()

    state.upsert("NodeClaim", node_claim("mine", nodepool="a").to_dict())
    state.upsert("NodeClaim", node_claim("theirs", nodepool="b").to_dict())
    state.upsert("Node", node_doc("n-mine", "a"))
    state.upsert("Node", node_doc("n-theirs", "b"))
    state.upsert("Node", node_doc("n-unowned", None))
    state.upsert("NodePool", node_pool("a").to_dict())
    state.upsert("NodePool", node_pool("b").to_dict())
    state.upsert("Pod", pod_manifest("p"))
    state.remove("NodeClaim", "gone")

    assert watch.take() == {
        "NodeClaim": {"mine", "gone"},
        "Node": {"n-mine", "n-unowned"},
        "NodePool": {"a"},
        "Pod": {"default/p"},
    }
    state.upsert("NodeClaim", node_claim("theirs", nodepool="b").to_dict())
    assert watch.take() == {}, "a write of another shard's pool is no change to this one"
