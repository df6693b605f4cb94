"""Expiration is forceful, as Karpenter's: an expired node goes whatever the budgets, do-not-disrupt or
PDBs say; those hold its drain only until `terminationGracePeriod`, counted from the moment it expired."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.api.nodepool import DisruptionReason
from provisioner.disruption import plan
from provisioner.disruption.model import Command, DisruptionPlan
from provisioner.scheduling import SolveFn
from provisioner.state.objects import Pod, PodDisruptionBudget
from provisioner.state.snapshot import StateNode
from testkit.controllers.world import MemoryBackend, World, gpu_pod, node_class, node_pool, pdb
from testkit.typed import present
from tests.unit.disruption import builders as b

LARGE = b.instance_type("m.large", cpu=8, memory_gib=32, price=0.40)
SMALL = b.instance_type("m.small", cpu=2, memory_gib=8, price=0.10)


def expired(name: str = "old", *, pods: Sequence[Pod] = (), **kw: Any) -> StateNode:
    return b.state_node(
        name, it=LARGE, pods=pods, created=b.NOW - timedelta(hours=25), expire_after="24h", **kw
    )


def run(
    nodes: list[StateNode],
    *,
    solve: SolveFn,
    pools: list[NodePool] | None = None,
    pdbs: Sequence[PodDisruptionBudget] = (),
) -> DisruptionPlan:
    pools = pools or [b.node_pool()]
    snap = b.snapshot(nodes, pools=pools, pdbs=pdbs)
    return plan(snap, instance_types={p.name: [SMALL, LARGE] for p in pools}, now=b.NOW, solve=solve)


def expirations(result: DisruptionPlan) -> list[Command]:
    return [c for c in result.commands if c.reason == DisruptionReason.EXPIRED]


@pytest.mark.parametrize(
    ("what", "kw"),
    [
        pytest.param("do-not-disrupt pod", {"pods": [b.pod("p", annotations={wk.DO_NOT_DISRUPT: "true"})]}),
        pytest.param("do-not-disrupt node", {"node_annotations": {wk.DO_NOT_DISRUPT: "true"}}),
        pytest.param("pdb", {"pods": [b.pod("p", labels={"app": "web"})]}),
    ],
    ids=["do-not-disrupt-pod", "do-not-disrupt-node", "pdb-allows-none"],
)
def test_an_expired_node_goes_whatever_protects_it_from_voluntary_disruption(
    solve: SolveFn, what: str, kw: dict[str, Any]
) -> None:
    pdbs = [b.pdb("web", match={"app": "web"}, max_unavailable=0)]
    result = run([expired(**kw)], solve=solve, pdbs=pdbs)
    (command,) = expirations(result)
    assert command.node_names == ("old",), what


def test_expiration_is_not_held_by_a_budget_of_zero(solve: SolveFn) -> None:
    pools = [b.node_pool(budgets=[{"nodes": "0"}])]
    nodes = [expired(f"old{i}", pods=[b.pod(f"p{i}")]) for i in range(3)]
    result = run(nodes, solve=solve, pools=pools)
    assert sorted(c.node_names[0] for c in expirations(result)) == ["old0", "old1", "old2"]


def test_an_expired_node_whose_pods_fit_nowhere_still_goes_and_says_so(solve: SolveFn) -> None:
    # Only SMALL is offered to the re-solve: the pod has nowhere to go now.
    snap = b.snapshot([expired(pods=[b.pod("huge", cpu="7")])])
    result = plan(snap, instance_types={"default": [SMALL]}, now=b.NOW, solve=solve)
    (command,) = expirations(result)
    assert command.replacements == ()
    assert "fit nowhere now" in command.records[0].detail


def test_an_expired_node_held_by_do_not_disrupt_is_gone_by_expire_after_plus_the_grace_period() -> None:
    w = World(MemoryBackend)
    w.manager = w.new_manager(disruption=True)
    pool = node_pool("gpu", termination_grace_period="1h")
    pool["spec"]["template"]["spec"]["expireAfter"] = "2h"
    w.apply(node_class(), pool, pdb("train", match_labels={"app": "train"}, max_unavailable=0))
    w.keep(gpu_pod("pinned", annotations={wk.DO_NOT_DISRUPT: "true"}))
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    expiry = present(claim.metadata.creation_timestamp) + timedelta(hours=2)
    w.run_until(lambda: w.clock.now() >= expiry + timedelta(minutes=30), max_ticks=200, seconds=60)
    assert claim.name in w.state.claims, "held by do-not-disrupt until the grace period"
    old = w.state.claims[claim.name]
    assert old.metadata.deletion_timestamp is not None, "deleted at expiry, not held by anything"
    w.run_until(lambda: claim.name not in w.state.claims, max_ticks=60, seconds=60)
    assert w.clock.now() <= expiry + timedelta(hours=1, minutes=2)
    assert w.metric("provisioner_evictions_total", result="forced") >= 1


def test_the_grace_period_of_an_expired_node_counts_from_its_expiry_not_from_a_late_deletion() -> None:
    w = World(MemoryBackend)
    pool = node_pool("gpu", termination_grace_period="1h")
    pool["spec"]["template"]["spec"]["expireAfter"] = "2h"
    w.apply(node_class(), pool)
    w.keep(gpu_pod("pinned", annotations={wk.DO_NOT_DISRUPT: "true"}))
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    expiry = present(claim.metadata.creation_timestamp) + timedelta(hours=2)
    w.run_until(lambda: w.clock.now() >= expiry + timedelta(minutes=40), max_ticks=200, seconds=60)
    # Deleted 40 minutes late, for expiration: 20 minutes of grace are left, not an hour.
    w.backend.patch("NodeClaim", claim.name, {"metadata": {"annotations": {wk.DISRUPTION_REASON: "Expired"}}})
    w.backend.delete("NodeClaim", claim.name)
    w.run_until(lambda: claim.name not in w.state.claims, max_ticks=60, seconds=60)
    assert w.clock.now() <= expiry + timedelta(hours=1, minutes=2)
