"""Crash safety and garbage collection: a controller killed between "instance launched" and "status
written" neither launches a second instance nor leaks the first; orphans are collected."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.controllers.conditions import condition_status
from testkit.controllers.world import World, gpu_pod, node_class, node_pool
from testkit.typed import present


class Killed(BaseException):
    """The process died (a BaseException, so nothing in the controllers catches it)."""


class DiesAfterLaunch:
    """A ClusterAPI that kills the process at the status write that records a launched instance."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def patch_nodeclaim_status(self, name: str, status: Any) -> None:
        if "providerID" in status:
            raise Killed(f"killed before writing the status of {name}")
        self.inner.patch_nodeclaim_status(name, status)


def _crash_after_launch(w: World) -> str:
    w.manager = w.new_manager(cluster=DiesAfterLaunch(w.backend.cluster))
    w.kubelet.hold = True
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    with pytest.raises(Killed):
        w.run_until(lambda: False, max_ticks=20)
    (claim,) = w.claims()
    assert not claim.status.provider_id, "the crash came before the status write"
    assert [i.nodeclaim for i in w.fake.list()] == [claim.name], "the instance was launched"
    return claim.name


def test_a_restart_after_a_crash_between_launch_and_status_does_not_launch_twice(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    name = _crash_after_launch(w)
    w.restart()
    w.kubelet.hold = False
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    assert claim.name == name
    assert condition_status(claim, "Initialized") == "True"
    assert w.fake.launched_total == 1, "the same instance was found again, none launched twice"
    (instance,) = w.fake.list()
    assert instance.provider_id == claim.status.provider_id
    for _ in range(40):
        w.tick(5)
    assert w.metric("provisioner_instances_collected_total") == 0, "nothing to collect"
    assert [i.provider_id for i in w.fake.list()] == [claim.status.provider_id]


def test_an_instance_whose_claim_vanished_during_a_crash_is_collected_after_the_grace_period(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    name = _crash_after_launch(w)
    orphan = w.fake.list()[0].provider_id
    # While the controller is down, someone removes the claim, finalizer and all.
    w.backend.patch("NodeClaim", name, {"metadata": {"finalizers": None}})
    w.backend.delete("NodeClaim", name)
    w.restart()
    w.kubelet.hold = False
    w.run_until(w.all_bound, max_ticks=30)
    w.run_until(lambda: orphan not in {i.provider_id for i in w.fake.list()}, max_ticks=20, seconds=5)
    assert w.metric("provisioner_instances_collected_total") == 1
    (claim,) = w.claims()
    assert claim.name != name
    assert [i.provider_id for i in w.fake.list()] == [claim.status.provider_id], "no leaked instance"


def test_a_claim_whose_instance_is_gone_is_deleted_and_finalized(make_world: Callable[..., World]) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    w.fake.delete(present(claim.status.provider_id))  # terminated behind our back (console, another tool)
    w.run_until(lambda: claim.name not in w.state.claims, max_ticks=10, seconds=5)
    assert w.metric("provisioner_nodeclaims_collected_total") == 1


def test_a_node_of_ours_without_a_claim_is_deleted_after_the_grace_period(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "stray", "labels": {"provisioner.sh/nodepool": "gpu"}},
        "spec": {"providerID": "fake://us-east-1a/stray"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    foreign = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "someone-elses"}, "spec": {}}
    w.apply(node, foreign)
    w.tick(5)
    assert "stray" in w.state.nodes, "not before the grace period"
    w.run_until(lambda: "stray" not in w.state.nodes, max_ticks=20, seconds=5)
    assert "someone-elses" in w.state.nodes
    assert w.metric("provisioner_nodes_collected_total") == 1


def test_a_placement_group_left_by_a_gang_is_deleted_after_the_grace_period(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.fake.placement_groups["fake-pg-ml/train"] = w.clock.now()  # its gang's nodes are gone
    w.tick(5)
    assert "fake-pg-ml/train" in w.fake.placement_groups, "not before the grace period"
    w.run_until(lambda: not w.fake.placement_groups, max_ticks=40, seconds=15)
    assert ("collect_placement",) in w.fake.calls


class DiesMarkingForDisruption:
    """A ClusterAPI that kills the process once disruption has tainted a node and set its claim's
    Disrupting condition, before it deletes the claim."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def patch_nodeclaim(self, name: str, patch: Any) -> None:
        if wk.DISRUPTION_REASON in (patch.get("metadata") or {}).get("annotations", {}):
            raise Killed(f"killed while marking {name} for disruption")
        self.inner.patch_nodeclaim(name, patch)


def test_marks_of_a_disruption_killed_half_way_are_cleared_and_the_node_is_consolidated_after_restart(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    pool = node_pool("gpu")
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    w.apply(node_class(), pool, gpu_pod("train-0", owner="Job"))
    w.run_until(w.all_bound, max_ticks=30)
    w.manager = w.new_manager(cluster=DiesMarkingForDisruption(w.backend.cluster), disruption=True)
    w.backend.delete("Pod", "train-0", namespace="default")
    with pytest.raises(Killed):
        w.run_until(lambda: False, max_ticks=30, seconds=5)
    (claim,) = w.claims()
    assert condition_status(claim, "Disrupting") == "True", "the crash came after the marks"
    w.restart()
    w.manager = w.new_manager(disruption=True)
    w.run_until(lambda: not w.claims(), max_ticks=30, seconds=5)
