"""A re-solve that may not send pods onto capacity still in flight (return-to-preferred, the forceful
moves) hides that capacity as a destination, but it still counts toward its pool's limits: found by the
sharded chaos campaign (bench/chaos.py --sharded, seed 4, two replicas), where a takeover left a
preferred pool's claims in flight while its pods waited, and return-to-preferred launched two more nodes
into that pool past its GPU limit. So does what a plan's earlier command launches, and a node being
disrupted until it is gone (the same campaign against a cluster, README "Running the controller tests
against a real cluster")."""

from __future__ import annotations

import pytest

from provisioner.api import labels as wk
from provisioner.scheduling import SolveFn
from provisioner.state import StateNode
from testkit.builders import pools as kit_pools
from tests.unit.disruption.builders import instance_type, node_pool, pod, state_node
from tests.unit.disruption.test_planner import run, types_for

LIST = {wk.NODEPOOLS: "preferred,fallback"}


@pytest.mark.parametrize("registered", [False, True], ids=["in-flight", "not-initialized"])
def test_a_pod_does_not_return_to_its_preferred_pool_past_the_pools_limit(
    solve: SolveFn, registered: bool
) -> None:
    limited = kit_pools.node_pool("preferred", weight=50, limits={"cpu": "8"})
    fallback = node_pool("fallback", weight=10)
    it = instance_type("g.large", cpu=8, memory_gib=32, price=1.0)
    # The preferred pool's one node (its whole limit) is still on its way, its pods not bound yet.
    coming = state_node("coming", pool="preferred", it=it, initialized=False)
    if not registered:
        coming = StateNode(name="coming", node=None, claim=coming.claim)
    low = state_node("low", pool="fallback", it=it, pods=[pod("a", cpu="6", annotations=LIST)])
    pools = [limited, fallback]

    result = run([coming, low], solve=solve, pools=pools, types=types_for(*pools, types=[it]))

    moved = [(c.method, [r.nodepool.name for r in c.replacements]) for c in result.commands]
    assert moved == [], "the preferred pool is at its limit: nothing may launch there"


def test_two_pods_do_not_return_to_their_preferred_pool_past_its_limit_in_one_plan(solve: SolveFn) -> None:
    # The preferred pool has room for one node: the plan's first return launches it, and the second
    # command must count that launch (the sharded chaos campaign against a cluster saw 3 claims in a pool
    # limited to 2 GPUs, two replacements launched the same second).
    limited = kit_pools.node_pool("preferred", weight=50, limits={"cpu": "8"})
    fallback = node_pool("fallback", weight=10, budgets=[{"nodes": "100%"}])
    it = instance_type("g.large", cpu=8, memory_gib=32, price=1.0)
    lows = [
        state_node(f"low-{i}", pool="fallback", it=it, pods=[pod(f"p{i}", cpu="6", annotations=LIST)])
        for i in range(2)
    ]
    pools = [limited, fallback]

    result = run(lows, solve=solve, pools=pools, types=types_for(*pools, types=[it]))

    launched = [r.nodepool.name for c in result.commands for r in c.replacements]
    assert launched == ["preferred"], "one node fills the preferred pool's limit: one return, not two"


def test_a_pod_does_not_return_to_a_pool_whose_limit_a_node_being_disrupted_still_fills(
    solve: SolveFn,
) -> None:
    # The preferred pool's one node is being deleted: it still exists (and is paid for) until it is gone,
    # so it still counts toward the limit, as provisioning counts it.
    limited = kit_pools.node_pool("preferred", weight=50, limits={"cpu": "8"})
    fallback = node_pool("fallback", weight=10)
    it = instance_type("g.large", cpu=8, memory_gib=32, price=1.0)
    going = state_node("going", pool="preferred", it=it, deleting=True)
    low = state_node("low", pool="fallback", it=it, pods=[pod("a", cpu="6", annotations=LIST)])
    pools = [limited, fallback]

    result = run([going, low], solve=solve, pools=pools, types=types_for(*pools, types=[it]))

    launched = [r.nodepool.name for c in result.commands for r in c.replacements]
    assert "preferred" not in launched, "the pool is at its limit until the node being deleted is gone"
