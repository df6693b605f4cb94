"""Termination (the NodeClaim finalizer) and interruption, over memory and the API fixture."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.world import World, gpu_pod, node_class, node_pool, pdb
from testkit.typed import present
from tests.controllers.conftest import REAL_CLUSTER


def _one_bound_claim(w: World, *pods: Mapping[str, Any], **pool_kw: Any) -> NodeClaim:
    if not pods and not w.state.pods:
        pods = (gpu_pod("train-0"),)
    w.apply(node_class(), node_pool("gpu", **pool_kw), *pods)
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    return claim


def test_deleting_a_claim_drains_terminates_the_instance_deletes_the_node_and_releases_the_finalizer(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    claim = _one_bound_claim(w)
    node_name = claim.status.node_name
    w.backend.delete("NodeClaim", claim.name)
    w.tick()
    node = w.state.nodes.get(node_name or "")
    assert node is None or any(t.key == wk.DISRUPTED_TAINT for t in node.taints)
    w.run_until(lambda: claim.name not in w.state.claims, max_ticks=10)
    assert node_name not in w.state.nodes
    assert not w.fake.list()
    assert ("delete", claim.status.provider_id) in w.fake.calls
    assert "default/train-0" not in w.state.pods, "the pod was evicted"
    assert w.metric("provisioner_nodeclaims_terminated_total", nodepool="gpu") == 1


def test_a_pdb_that_allows_no_disruption_holds_the_drain_until_it_allows(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.apply(pdb("train", match_labels={"app": "train"}, max_unavailable=0))
    claim = _one_bound_claim(w)
    w.backend.delete("NodeClaim", claim.name)
    for _ in range(10):
        w.tick(5)
    assert claim.name in w.state.claims, "held by the PDB"
    assert w.state.pods["default/train-0"].node_name == claim.status.node_name
    assert claim.status.provider_id in {i.provider_id for i in w.fake.list()}, "it runs until drained"
    assert [c for c in w.claims() if c.name != claim.name], "a replacement for the pod waiting to move"
    (blocked,) = [e for e in w.events("DrainBlocked") if e["involvedObject"]["name"] == claim.name]
    assert "disruption budget" in blocked["message"]
    w.backend.delete("PodDisruptionBudget", "train", namespace="default")
    w.run_until(lambda: claim.name not in w.state.claims, max_ticks=10, seconds=5)
    assert claim.status.provider_id not in {i.provider_id for i in w.fake.list()}


def test_do_not_disrupt_holds_a_voluntary_deletion_until_the_termination_grace_period(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    pinned = gpu_pod("pinned", annotations={wk.DO_NOT_DISRUPT: "true"})
    claim = _one_bound_claim(w, pinned, termination_grace_period="10m")
    w.backend.delete("NodeClaim", claim.name)
    for _ in range(9):
        w.tick(60)
    assert claim.name in w.state.claims and "default/pinned" in w.state.pods
    w.run_until(lambda: claim.name not in w.state.claims, max_ticks=5, seconds=60)
    assert "default/pinned" not in w.state.pods
    assert w.metric("provisioner_evictions_total", result="forced") == 1


def test_an_interruption_cordons_the_node_and_replaces_it_at_once(make_world: Callable[..., World]) -> None:
    w = make_world()
    w.keep(gpu_pod("pinned", annotations={wk.DO_NOT_DISRUPT: "true"}))
    claim = _one_bound_claim(w, *[])
    w.fake.interrupt(present(claim.status.provider_id))
    w.tick()
    assert (
        claim.name not in w.state.claims or w.state.claims[claim.name].metadata.deletion_timestamp is not None
    )
    replacement = [c for c in w.claims() if c.name != claim.name]
    assert replacement, "the replacement is solved in the same step, not after the batch window"
    w.run_until(lambda: claim.name not in w.state.claims and w.all_bound(), max_ticks=20)
    assert any(e["involvedObject"]["name"] == claim.name for e in w.events("Interrupted"))
    (pod,) = w.pods()
    assert pod.name.startswith("pinned."), "evicted although do-not-disrupt: the node goes anyway"
    assert pod.node_name == replacement[0].status.node_name or pod.node_name in w.state.nodes
    assert w.metric("provisioner_interruptions_total", kind="spot-interruption") == 1


def test_with_disruption_on_deleting_the_workload_lets_its_claims_be_terminated(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.manager = w.new_manager(disruption=True)
    claim = _one_bound_claim(w)
    for p in w.pods():
        w.backend.delete("Pod", p.name, namespace=p.namespace)
    w.run_until(lambda: not w.state.claims, max_ticks=30, seconds=5)
    assert not w.state.nodes
    assert claim.status.provider_id not in {i.provider_id for i in w.fake.list()}
    assert not w.fake.list()


def test_a_pool_at_its_limit_launches_no_replacement_while_its_node_is_being_deleted(
    make_world: Callable[..., World],
) -> None:
    """A node being deleted is still paid for: its pods wait rather than push the pool past its limit."""
    w = make_world()
    w.apply(pdb("train", match_labels={"app": "train"}, max_unavailable=0))
    claim = _one_bound_claim(w, limits={"nodes": "1"})
    w.backend.delete("NodeClaim", claim.name)
    for _ in range(10):
        w.tick(5)
    assert claim.name in w.state.claims, "held by the PDB"
    assert [c.name for c in w.claims()] == [claim.name], "no second node while the first is still paid for"
    assert len(w.fake.list()) == 1
    waiting = [e for e in w.events() if "limit nodes=1 reached" in e.get("message", "")]
    assert waiting, "the pod that must move is told why it waits"
    w.backend.delete("PodDisruptionBudget", "train", namespace="default")
    w.run_until(lambda: claim.name not in w.state.claims, max_ticks=10, seconds=5)
    assert len(w.fake.list()) <= 1


@pytest.mark.skipif(bool(REAL_CLUSTER), reason="counts the fixture's conflicts and injects one")
@pytest.mark.parametrize("empty", [True, False], ids=["empty-node", "with-pod"])
@pytest.mark.parametrize("injected", [0, 1, 2])
def test_termination_writes_without_conflicting_with_itself_and_retries_a_conflict_once_quietly(
    kube_server: KubeServer,
    make_kube_world: Callable[..., World],
    caplog: pytest.LogCaptureFixture,
    injected: int,
    empty: bool,
) -> None:
    # On a real v1.36 server termination met `409 the object has been modified` on every deletion: the
    # finalizer patch carried the resourceVersion read before its own status write. Now it works from
    # the state its writes keep current; a conflict another writer causes is retried once on the
    # object read afresh, and a second one waits for the next reconcile, all without a warning.
    w = make_kube_world()
    claim = _one_bound_claim(w)
    if empty:  # drained at once: the status write and the finalizer patch come in one reconcile
        w.backend.delete("Pod", "train-0", namespace="default")
        w.kubelet.sync()
        w.backend.settle()
    caplog.set_level(logging.INFO)
    before = kube_server.emulator.conflicts
    kube_server.emulator.fail_next["PATCH nodeclaims"] = injected
    kube_server.emulator.fail_status["PATCH nodeclaims"] = 409
    w.backend.delete("NodeClaim", claim.name)
    w.run_until(lambda: claim.name not in w.state.claims, max_ticks=10)
    assert claim.name not in {i.nodeclaim for i in w.fake.list()}, "its instance is terminated"
    assert kube_server.emulator.conflicts == before, "no write of ours carried a stale version"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
