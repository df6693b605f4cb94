"""Provisioning batches and launch failures (in memory: the logic, not the transport)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from provisioner.cli.main import app
from provisioner.cloudprovider import CreateError
from provisioner.controllers.conditions import condition_status
from provisioner.controllers.settings import ControllerSettings
from provisioner.scheduling import Results
from provisioner.state.cluster import Snapshot
from provisioner.state.objects import Pod
from testkit.controllers.world import MemoryBackend, World, gpu_pod, node_class, node_pool
from testkit.typed import present


def _world(**settings: Any) -> World:
    return World(MemoryBackend, settings=ControllerSettings(cluster_name="test", **settings))


def _mark_unschedulable(w: World) -> None:
    w.binder.sync()


def test_a_batch_closes_after_the_idle_window_without_new_pods() -> None:
    w = _world(batch_idle=timedelta(seconds=1), batch_max=timedelta(seconds=10))
    w.apply(node_class(), node_pool("gpu"), gpu_pod("a"))
    _mark_unschedulable(w)
    w.manager.step(w.clock.now())
    assert w.manager.provisioning.batches == 0, "the window just opened"
    w.clock.advance(0.5)
    w.manager.step(w.clock.now())
    assert w.manager.provisioning.batches == 0
    w.clock.advance(0.6)
    w.manager.step(w.clock.now())
    assert w.manager.provisioning.batches == 1
    assert len(w.claims()) == 1


def test_pods_arriving_steadily_are_batched_until_the_max_window() -> None:
    w = _world(batch_idle=timedelta(seconds=1), batch_max=timedelta(seconds=10))
    w.apply(node_class(), node_pool("gpu"))
    for i in range(25):
        w.apply(gpu_pod(f"p{i}"))
        _mark_unschedulable(w)
        w.manager.step(w.clock.now())
        if w.manager.provisioning.batches:
            break
        w.clock.advance(0.5)
    assert w.manager.provisioning.batches == 1
    assert i == 20, "closed by the 10 s max window, with a pod arriving every 0.5 s"
    assert sum(len(n.pods) for n in present(w.manager.provisioning.last_results).new_claims) == 21


def test_a_solved_batch_is_not_solved_again_while_nothing_changes() -> None:
    w = _world()
    w.apply(node_class(), node_pool("gpu"), gpu_pod("a"))
    w.kubelet.hold = True
    for _ in range(20):
        w.tick()
    assert w.manager.provisioning.batches <= 2
    assert len(w.claims()) == 1


def test_a_launch_that_fails_for_another_reason_is_reported_and_retried() -> None:
    w = _world()
    w.fake.fail_next_create(CreateError("the AMI is not authorized"))
    w.apply(node_class(), node_pool("gpu"), gpu_pod("a"))
    w.run_until(
        lambda: bool(w.claims()) and condition_status(w.claims()[0], "Launched") == "False", max_ticks=10
    )
    (event,) = [e for e in w.events("CreateError")]
    assert "AMI is not authorized" in event["message"]
    assert w.metric("provisioner_launch_failures_total", reason="CreateError") == 1
    w.run_until(w.all_bound, max_ticks=10)
    (claim,) = w.claims()
    assert condition_status(claim, "Launched") == "True"


def test_a_claim_that_cannot_launch_is_replaced_after_the_launch_timeout() -> None:
    w = _world(launch_timeout=timedelta(minutes=5))
    w.fake.fail_next_create(CreateError("no"), times=1000)
    w.apply(node_class(), node_pool("gpu"), gpu_pod("a"))
    w.run_until(lambda: bool(w.claims()), max_ticks=5)
    first = w.claims()[0].name
    w.run_until(lambda: first not in w.state.claims, max_ticks=10, seconds=60)
    assert any(e["involvedObject"]["name"] == first for e in w.events("LaunchFailed"))


def test_run_refuses_bad_flags_with_a_clear_message() -> None:
    result = CliRunner().invoke(app, ["run", "--log-format", "xml"])
    assert result.exit_code == 2
    assert "error: --log-format: 'xml' is not known; allowed: json, text" in result.output
    result = CliRunner().invoke(app, ["run", "--batch-idle", "5", "--batch-max", "1"])
    assert result.exit_code == 2
    assert "--batch-max" in result.output


def test_run_refuses_to_start_without_an_explicit_cloud(monkeypatch: pytest.MonkeyPatch) -> None:
    """No silent fake cloud: it would make Ready Nodes for instances that do not exist in a real cluster."""
    monkeypatch.delenv("PROVISIONER_CLOUD", raising=False)
    result = CliRunner().invoke(app, ["run", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --cloud: required; allowed: aws, gcp, fake")


def test_run_refuses_shards_over_the_fake_cloud_without_its_state_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Sharded replicas share one fake cloud, so they need its state file (the fake plug-in says so)."""
    monkeypatch.delenv("PROVISIONER_CLOUD", raising=False)
    args = ["run", "--url", "http://127.0.0.1:9", "--shards", "2"]

    for cloud in ("fake", "aws,fake"):
        result = CliRunner().invoke(app, [*args, "--cloud", cloud])
        assert result.exit_code == 2
        assert result.stderr == (
            "error: --fake-state: required with --shards and --cloud fake (the replicas share one fake cloud)\n"
        )
    # Not asked of another cloud, nor without shards, nor once given: the run goes on to the next check
    # (here a batch window it refuses, before it would connect).
    stop = ["--batch-idle", "5", "--batch-max", "1"]
    state = ["--fake-state", str(tmp_path / "fake.json")]
    for extra in (["--cloud", "aws"], ["--cloud", "aws,fake", "--shards", "0"], ["--cloud", "fake", *state]):
        result = CliRunner().invoke(app, [*args, *extra, *stop])
        assert result.exit_code == 2
        assert result.stderr.startswith("error: --batch-max"), result.stderr


def test_a_failing_launch_backs_off_instead_of_calling_the_cloud_every_step() -> None:
    w = _world(launch_backoff=timedelta(seconds=5), launch_backoff_max=timedelta(seconds=40))
    w.fake.fail_next_create(CreateError("quota for the AMI"), times=1000)
    w.apply(node_class(), node_pool("gpu"), gpu_pod("a"))
    for _ in range(120):
        w.tick()
    creates = [c for c in w.fake.calls if c[0] == "create"]
    # 5 + 10 + 20 + 40 + 40 ... seconds apart: a handful of calls in two minutes, not one per second.
    assert 3 <= len(creates) <= 7, len(creates)


def test_the_cluster_default_pools_in_the_settings_route_launches_and_refuse_what_they_cannot_serve() -> None:
    from provisioner.scheduling.pool_order import ClusterDefaults

    heavy = node_pool("gpu-heavy", gpu_names=("a10g",), weight=100)
    light = node_pool("gpu-light", gpu_names=("a10g",), weight=1)
    w = _world(pool_defaults=ClusterDefaults(gpu=("gpu-light",)))
    w.apply(node_class(), heavy, light, gpu_pod("a"))
    w.run_until(lambda: bool(w.claims()))
    assert [c.nodepool for c in w.claims()] == ["gpu-light"], "the default list, against the weights"

    refusing = _world(pool_defaults=ClusterDefaults(gpu=("cpu",)))
    refusing.apply(
        node_class(), heavy, node_pool("cpu", gpu_names=None, instance_types=["m5.large"]), gpu_pod("b")
    )
    refusing.run_until(lambda: bool(refusing.events("FailedProvisioning")), max_ticks=10)
    assert not refusing.claims()
    (event,) = refusing.events("FailedProvisioning")
    assert "the cluster's default GPU pools (cpu) and none of them launches GPU nodes" in event["message"]


def test_the_disruption_planner_solves_with_the_cluster_default_pools() -> None:
    """Consolidation re-solves pods to prove they fit elsewhere: with the defaults, as provisioning does."""
    from provisioner.scheduling.pool_order import ClusterDefaults

    defaults = ClusterDefaults(cpu=("cpu",), gpu=("gpu-light",))
    w = _world(pool_defaults=defaults)
    w.apply(node_class(), node_pool("gpu-light"), node_pool("gpu-heavy", weight=100), gpu_pod("a"))
    w.manager = w.new_manager(disruption=True)
    seen: list[ClusterDefaults] = []

    def recording_solve(pods: Sequence[Pod], snapshot: Snapshot, /, **kw: Any) -> Results:
        seen.append(kw["options"].pool_defaults)
        from provisioner import scheduling

        return scheduling.solve(pods, snapshot, **kw)

    present(w.manager.disruption).solve = recording_solve
    w.run_until(lambda: w.all_bound() and bool(seen), max_ticks=40, seconds=5)
    assert seen and set(seen) == {defaults}
    assert [c.nodepool for c in w.claims()] == ["gpu-light"]


def test_labels_only_the_cloud_knows_reach_the_claim_and_the_node(make_world: Callable[..., World]) -> None:
    w = make_world()
    w.fake.cloud_labels = {"topology.k8s.aws/network-node-layer-3": "nn-3"}
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    assert claim.metadata.labels["topology.k8s.aws/network-node-layer-3"] == "nn-3"
    (node,) = w.state.nodes.values()
    assert node.labels["topology.k8s.aws/network-node-layer-3"] == "nn-3"


def test_a_pod_arriving_while_a_batch_is_solved_opens_the_next_batch() -> None:
    from provisioner import scheduling

    w = _world()
    w.apply(node_class(), node_pool("gpu"), gpu_pod("a"))
    late = {"sent": False}

    def solve_while_a_pod_arrives(*args: Any, **kw: Any) -> Results:
        results = scheduling.solve(*args, **kw)
        if not late["sent"]:
            late["sent"] = True
            w.apply(gpu_pod("late"))
            w.binder.sync()  # kube-scheduler marks it Unschedulable during the solve
        return results

    w.manager = w.new_manager(solve=solve_while_a_pod_arrives)
    w.kubelet.hold = True
    w.run_until(lambda: late["sent"], max_ticks=10)
    w.run_until(lambda: len(w.claims()) == 2, max_ticks=10)
    assert w.manager.provisioning.batches == 2
