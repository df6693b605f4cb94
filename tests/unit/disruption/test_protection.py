"""What keeps a node from voluntary disruption, as Karpenter's candidate filtering: a do-not-disrupt
annotation on a pod (`true`, or a duration that lapses), and PDBs, those that select DaemonSet pods too."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.controllers.disruption import DisruptionController
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.provider_set import ProviderSet
from provisioner.disruption import BlockerKind, plan
from provisioner.disruption.candidates import do_not_disrupt, do_not_disrupt_problem
from provisioner.disruption.model import DisruptionPlan
from provisioner.scheduling import SolveFn
from provisioner.state.objects import Pod, PodDisruptionBudget
from provisioner.state.snapshot import StateNode
from testkit.controllers.world import MemoryBackend, World, gpu_pod, node_class, node_pool
from tests.unit.disruption.builders import NOW, instance_type, pdb, pod, snapshot, state_node
from tests.unit.disruption.builders import node_pool as pool

LARGE = instance_type("m.large", cpu=8, memory_gib=32, price=0.40)
SMALL = instance_type("m.small", cpu=2, memory_gib=8, price=0.10)


def run(
    nodes: list[StateNode],
    *,
    solve: SolveFn,
    pdbs: Sequence[PodDisruptionBudget] = (),
    pools: list[NodePool] | None = None,
) -> DisruptionPlan:
    pools = pools or [pool()]
    snap = snapshot(nodes, pools=pools, pdbs=pdbs)
    return plan(snap, instance_types={p.name: [SMALL, LARGE] for p in pools}, now=NOW, solve=solve)


def guarded(value: str, *, started_ago: timedelta | None) -> Pod:
    started = NOW - started_ago if started_ago is not None else None
    return pod("guarded", annotations={wk.DO_NOT_DISRUPT: value}, started=started)


def test_a_do_not_disrupt_duration_protects_the_node_until_it_lapses(solve: SolveFn) -> None:
    result = run(
        [state_node("n", it=LARGE, pods=[guarded("2h", started_ago=timedelta(hours=1))])], solve=solve
    )
    assert result.commands == []
    (found,) = [b for b in result.blockers if b.node == "n"]
    assert found.kind == BlockerKind.DO_NOT_DISRUPT_POD
    assert "ml/guarded" in found.detail and "2h" in found.detail
    assert (NOW + timedelta(hours=1)).isoformat() in found.detail, "says when the protection lapses"


def test_a_lapsed_do_not_disrupt_duration_no_longer_protects(solve: SolveFn) -> None:
    result = run(
        [state_node("n", it=LARGE, pods=[guarded("2h", started_ago=timedelta(hours=3))])], solve=solve
    )
    (command,) = result.commands
    assert command.node_names == ("n",)


def test_a_duration_counts_from_the_pod_start_and_protects_while_the_start_is_unknown() -> None:
    assert do_not_disrupt(guarded("90m", started_ago=timedelta(minutes=89)), NOW)
    assert not do_not_disrupt(guarded("90m", started_ago=timedelta(minutes=90)), NOW)
    assert do_not_disrupt(guarded("90m", started_ago=None), NOW)


@pytest.mark.parametrize("value", ["forever", "2 hours", "0s", "-1h", "Never", ""])
def test_an_invalid_value_is_ignored_and_named(solve: SolveFn, value: str) -> None:
    pod_ = guarded(value, started_ago=timedelta(minutes=1))
    problem = do_not_disrupt_problem(pod_)
    assert problem is not None and repr(value) in problem and "positive duration" in problem
    assert not do_not_disrupt(pod_, NOW)
    result = run([state_node("n", it=LARGE, pods=[pod_])], solve=solve)
    assert [c.node_names for c in result.commands] == [("n",)]


@pytest.mark.parametrize("value", ["true", "True", "2h", "1h30m"])
def test_valid_values_have_no_problem(value: str) -> None:
    assert do_not_disrupt_problem(guarded(value, started_ago=None)) is None


def controller(w: World) -> DisruptionController:
    return DisruptionController(
        state=w.state,
        cluster=w.backend.cluster,
        providers=ProviderSet.every_kind(w.provider),
        settings=w.settings,
        metrics=Metrics(),
        clock=w.clock,
    )


def test_the_controller_reports_an_invalid_value_once_and_keeps_going() -> None:
    w = World(MemoryBackend)
    w.apply(node_class(), node_pool("gpu", gpu_names=("a10g",)))
    w.apply(gpu_pod("job", annotations={wk.DO_NOT_DISRUPT: "forever"}))
    w.run_until(w.all_bound, max_ticks=30)
    ctl = controller(w)
    for _ in range(3):
        w.tick(10)
        ctl.reconcile(w.clock.now())
    (event,) = w.events("InvalidDoNotDisruptAnnotation")
    assert event["involvedObject"]["name"] == "job"
    assert "'forever'" in event["message"] and "ignored" in event["message"]
    # The pod changes on the same node: the node is looked at again (not taken from the last pass).
    w.backend.cluster.patch_pod(
        "default", "job", {"metadata": {"annotations": {wk.DO_NOT_DISRUPT: "2 hours"}}}
    )
    for _ in range(2):
        w.tick(10)
        ctl.reconcile(w.clock.now())
    first, second = w.events("InvalidDoNotDisruptAnnotation")
    assert "'forever'" in first["message"] and "'2 hours'" in second["message"]


def test_a_nodes_last_teams_follow_its_namespace_labels() -> None:
    # The empty node's ledger row names the teams its pods were of; the controller keeps what it read of an
    # unchanged node, but a namespace's team label changing must still reach it.
    w = World(MemoryBackend)
    w.apply(node_class(), node_pool("gpu", gpu_names=("a10g",)))
    w.state.upsert("Namespace", {"metadata": {"name": "default", "labels": {wk.TEAM: "vision"}}})
    w.apply(gpu_pod("job"))
    w.run_until(w.all_bound, max_ticks=30)
    ctl = controller(w)
    for _ in range(3):  # until its own writes (the claim's Empty condition) have settled
        w.tick(10)
        ctl.reconcile(w.clock.now())
    (node,) = {p.node_name for p in w.pods()}
    assert node is not None
    assert ctl.node_book.last_teams[node] == ("vision",)
    w.state.upsert("Namespace", {"metadata": {"name": "default", "labels": {wk.TEAM: "speech"}}})
    ctl.reconcile(w.clock.now())
    assert ctl.node_book.last_teams[node] == ("speech",)


# PDBs over DaemonSet pods ------------------------------------------------------------------------------

AGENT = {"app": "agent"}


def agent(name: str) -> Pod:
    return pod(name, labels=AGENT, owner="DaemonSet", cpu="100m", memory="128Mi")


@pytest.mark.parametrize(
    ("budget", "kept"),
    [
        pytest.param({"max_unavailable": 0}, True, id="allows-none"),
        pytest.param({"disruptions_allowed": 0, "min_available": 1}, True, id="status-says-none"),
        pytest.param({"max_unavailable": 1}, False, id="allows-one"),
    ],
)
def test_a_pdb_selecting_a_daemonset_pod_keeps_an_empty_node(
    solve: SolveFn, budget: dict[str, Any], kept: bool
) -> None:
    empty = state_node("empty", it=LARGE, pods=[agent("agent-empty")])
    busy = state_node("busy", it=LARGE, pods=[agent("agent-busy"), pod("w", cpu="6")])
    result = run([empty, busy], solve=solve, pdbs=[pdb("agents", match=AGENT, **budget)])
    if kept:
        assert result.commands == []
        found = [b for b in result.blockers if b.node == "empty"]
        assert found and found[0].kind == BlockerKind.PDB and "ml/agents" in found[0].detail
    else:
        (command,) = result.commands
        assert command.method == "emptiness" and command.node_names == ("empty",)


def test_a_pdb_selecting_a_daemonset_pod_keeps_an_underused_node_from_consolidation(solve: SolveFn) -> None:
    light = state_node("light", it=LARGE, pods=[agent("agent-light"), pod("a", cpu="1")])
    room = state_node("room", it=LARGE, pods=[agent("agent-room"), pod("b", cpu="1")])
    free = run([light, room], solve=solve, pdbs=[pdb("agents", match={"app": "other"}, max_unavailable=0)])
    assert free.commands, "without the PDB one of the two nodes goes"
    held = run([light, room], solve=solve, pdbs=[pdb("agents", match=AGENT, max_unavailable=0)])
    assert held.commands == []
    assert {b.node for b in held.blockers if b.kind == BlockerKind.PDB} == {"light", "room"}
