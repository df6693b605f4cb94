"""Pods to nodes and back, over the in-memory cluster and over a Kubernetes API on HTTP."""

from __future__ import annotations

from collections.abc import Callable

from provisioner.api import labels as wk
from provisioner.api.nodeclaim import INITIALIZED, LAUNCHED, READY, REGISTERED
from provisioner.cloudprovider import CreateError
from provisioner.controllers.conditions import condition_status
from provisioner.state.objects import Node
from testkit.controllers.world import World, gpu_pod, node_class, node_pool
from testkit.typed import present


def test_pending_gpu_pods_become_initialized_nodes_and_are_bound(make_world: Callable[..., World]) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"), gpu_pod("train-1"))
    w.run_until(w.all_bound, max_ticks=30)
    claims = w.claims()
    assert claims, w.describe()
    for claim in claims:
        assert claim.nodepool == "gpu"
        assert wk.TERMINATION_FINALIZER in claim.metadata.finalizers
        for cond in (LAUNCHED, REGISTERED, INITIALIZED, READY):
            assert condition_status(claim, cond) == "True", (claim.name, cond, claim.status.conditions)
        assert claim.status.instance_type and claim.status.instance_type.startswith(("g5", "g6"))
    nodes = list(w.state.nodes.values())
    assert len(nodes) == len(claims)
    for node in nodes:
        assert node.labels[wk.NODEPOOL] == "gpu"
        assert node.labels[wk.INITIALIZED] == "true"
        assert not any(t.key == wk.UNREGISTERED_TAINT for t in node.taints)
    assert len(w.fake.list()) == len(claims)


def test_the_ready_condition_follows_the_lifecycle_for_the_printer_column(
    make_world: Callable[..., World],
) -> None:
    # `kubectl get nodeclaims` reads .status.conditions[?(@.type=="Ready")].status: Unknown while the
    # node is on its way, False with the failed step's reason, True once initialized.
    w = make_world()
    w.kubelet.hold = True
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    w.run_until(lambda: any(condition_status(c, LAUNCHED) == "True" for c in w.claims()), max_ticks=30)
    (claim,) = w.claims()
    assert condition_status(claim, READY) == "Unknown"
    ready = next(c for c in claim.status.conditions if c.type == READY)
    assert ready.reason == "AwaitingRegistered"
    w.kubelet.hold = False
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    assert condition_status(claim, READY) == "True"


def test_a_failed_launch_makes_the_claim_not_ready_with_its_reason(make_world: Callable[..., World]) -> None:
    w = make_world()
    w.fake.fail_next_create(CreateError("launch template refused"), times=100)
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    w.run_until(lambda: any(condition_status(c, LAUNCHED) == "False" for c in w.claims()), max_ticks=30)
    claim = w.claims()[0]
    ready = next(c for c in claim.status.conditions if c.type == READY)
    assert (ready.status.value, ready.reason) == ("False", "CreateError")


def _on_demand_nodes(w: World) -> list[Node]:
    return [n for n in w.state.nodes.values() if n.labels.get(wk.CAPACITY_TYPE) == "on-demand"]


def test_spot_stockout_launches_on_demand_and_says_so(make_world: Callable[..., World]) -> None:
    w = make_world()
    w.fake.mark_unavailable(capacity_type="spot")
    w.apply(node_class(), node_pool("gpu", capacity_types=("spot", "on-demand")), gpu_pod("train-0"))
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    assert claim.status.capacity_type == "on-demand"
    assert _on_demand_nodes(w)
    fell_back = [e for e in w.events("FellBack") if e["involvedObject"]["name"] == claim.name]
    assert fell_back, w.events()
    assert "spot capacity" in fell_back[0]["message"] and "launched on-demand" in fell_back[0]["message"]


def test_spot_only_pool_out_of_capacity_falls_to_the_on_demand_pool_with_an_event(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.fake.mark_unavailable(capacity_type="spot")
    w.apply(
        node_class(),
        node_pool("spot", capacity_types=("spot",), weight=100),
        node_pool("ondemand", capacity_types=("on-demand",), weight=10),
        gpu_pod("train-0"),
    )
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    assert claim.nodepool == "ondemand" and claim.status.capacity_type == "on-demand"
    no_capacity = w.events("InsufficientCapacity")
    assert any(
        e["involvedObject"]["kind"] == "NodeClaim" and "provisioned again" in e["message"]
        for e in no_capacity
    ), w.events()
    assert len(w.fake.list()) == 1, "the spot claim launched nothing"


def test_a_node_that_never_registers_is_replaced_after_the_registration_timeout(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.kubelet.hold = True
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    w.run_until(lambda: any(c.status.provider_id for c in w.claims()), max_ticks=20)
    (first,) = w.claims()
    w.kubelet.never_register.add(first.name)
    w.kubelet.hold = False
    ticks = w.run_until(w.all_bound, max_ticks=40, seconds=60)
    assert ticks >= 14, "replaced only after the 15 minute registration timeout"
    assert first.name not in w.state.claims
    assert any(e["involvedObject"]["name"] == first.name for e in w.events("Unregistered"))
    assert first.status.provider_id not in {i.provider_id for i in w.fake.list()}, (
        "its instance is terminated"
    )
    assert len(w.fake.list()) == 1


def test_a_gpu_node_whose_gpus_never_appear_is_replaced_after_the_initialization_timeout(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.kubelet.hold = True
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    w.run_until(lambda: any(c.status.provider_id for c in w.claims()), max_ticks=20)
    (first,) = w.claims()
    w.kubelet.no_devices.add(first.name)
    w.kubelet.hold = False
    w.run_until(
        lambda: (
            first.name in w.state.claims
            and condition_status(w.state.claims[first.name], REGISTERED) == "True"
        )
    )
    assert condition_status(w.state.claims[first.name], INITIALIZED) != "True"
    ticks = w.run_until(w.all_bound, max_ticks=40, seconds=60)
    assert ticks >= 14, "replaced only after the initialization timeout"
    assert first.name not in w.state.claims
    (event,) = [e for e in w.events("NotInitialized") if e["involvedObject"]["kind"] == "NodeClaim"]
    assert "nvidia.com/gpu not allocatable" in event["message"]
    (claim,) = w.claims()
    assert condition_status(claim, INITIALIZED) == "True"


def test_an_unschedulable_pod_gets_one_event_with_the_reason_per_pool(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu", gpu_names=("a10g",)), gpu_pod("wants-h100", gpu_name="h100"))
    for _ in range(10):
        w.tick()
    assert not w.claims()
    events = [e for e in w.events("FailedProvisioning") if e["involvedObject"]["name"] == "wants-h100"]
    assert len(events) == 1, events
    assert events[0]["message"].startswith("no NodePool can take this pod: gpu: ")


def test_nodepool_status_counts_nodes_and_reports_limits(make_world: Callable[..., World]) -> None:
    w = make_world()
    w.apply(node_class(), node_pool("gpu", limits={"nvidia.com/gpu": "1"}), gpu_pod("train-0"))
    w.run_until(w.all_bound, max_ticks=30)
    w.tick()
    pool = w.state.nodepools["gpu"]
    assert pool.status is not None
    assert pool.status.resources["nodes"] == "1"
    assert pool.status.resources["nvidia.com/gpu"] == "1"
    conditions = {c.type: c.status.value for c in pool.status.conditions}
    assert conditions == {"Ready": "True", "NodeClassReady": "True", "LimitsReached": "True"}


def test_a_pool_without_its_node_class_is_not_ready(make_world: Callable[..., World]) -> None:
    w = make_world()
    w.apply(node_pool("gpu", node_class_name="missing"))
    w.tick()
    conditions = {
        c.type: (c.status.value, c.message) for c in present(w.state.nodepools["gpu"].status).conditions
    }
    assert conditions["Ready"][0] == "False"
    assert "AWSNodeClass missing not found" in conditions["NodeClassReady"][1]


def test_nodepool_status_drops_resources_the_pool_no_longer_has(make_world: Callable[..., World]) -> None:
    w = make_world()
    pool = node_pool("gpu")
    # As left behind by an earlier run: one 8-GPU node that is gone now.
    pool["status"] = {"resources": {"nodes": "1", "cpu": "96", "nvidia.com/gpu": "8"}}
    w.apply(node_class(), pool)
    w.tick()
    resources = present(w.state.nodepools["gpu"].status).resources
    assert "nvidia.com/gpu" not in resources and "cpu" not in resources, resources
    w.tick()
    assert present(w.state.nodepools["gpu"].status).resources == resources


def test_a_settled_claim_that_loses_its_initialized_condition_is_initialized_again(
    make_world: Callable[..., World],
) -> None:
    # Lifecycle passes over a claim it saw settled while the claim is unchanged; a changed claim is looked
    # at again, whatever its name.
    w = make_world()
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    w.run_until(w.all_bound, max_ticks=30)
    w.tick()
    (claim,) = w.claims()
    assert condition_status(claim, INITIALIZED) == "True"
    conditions = [
        {**c.model_dump(by_alias=True, exclude_none=True, mode="json"), "status": "False", "reason": "Edited"}
        if c.type == INITIALIZED
        else c.model_dump(by_alias=True, exclude_none=True, mode="json")
        for c in claim.status.conditions
    ]
    w.backend.patch_status("NodeClaim", claim.name, {"conditions": conditions})
    w.backend.settle()
    assert condition_status(w.state.claims[claim.name], INITIALIZED) == "False"
    w.tick()
    again = w.state.claims[claim.name]
    assert condition_status(again, INITIALIZED) == "True", w.describe()
    assert next(c for c in again.status.conditions if c.type == INITIALIZED).reason == "Initialized"


def test_nodepool_claim_metrics_follow_each_claim_through_its_phases(
    make_world: Callable[..., World],
) -> None:
    # The pool's claim counts and $/h are redone for a claim only when it changed: each step must show.
    w = make_world()
    w.kubelet.hold = True
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    w.run_until(lambda: any(c.status.provider_id for c in w.claims()), max_ticks=20)
    w.tick()
    assert w.metric("provisioner_nodeclaims", phase="Launched", nodepool="gpu") == 1
    (claim,) = w.claims()
    assert w.metric("provisioner_cost_per_hour", nodepool="gpu") == present(claim.status.price_per_hour) > 0
    assert present(w.state.nodepools["gpu"].status).resources["nvidia.com/gpu"] == "1"
    w.kubelet.hold = False
    w.run_until(w.all_bound, max_ticks=30)
    w.tick()
    assert w.metric("provisioner_nodeclaims", phase="Initialized", nodepool="gpu") == 1
    assert w.metric("provisioner_nodeclaims", phase="Launched", nodepool="gpu") == 0
