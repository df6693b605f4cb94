"""Gangs in the disruption planner: a gang's nodes are disrupted together or not at all."""

from __future__ import annotations

from datetime import timedelta

from provisioner.api import labels as wk
from provisioner.disruption import BlockerKind
from provisioner.scheduling import SolveFn
from provisioner.state.objects import Pod
from tests.unit.disruption.builders import NOW, node_pool, pod, state_node
from tests.unit.disruption.test_planner import LARGE, blocker, run


def member(name: str, node: str, *, group: str = "train", total: int = 2, cpu: str = "1") -> Pod:
    return pod(
        name,
        node=node,
        cpu=cpu,
        labels={wk.KUEUE_POD_GROUP_NAME: group},
        annotations={wk.KUEUE_POD_GROUP_TOTAL_COUNT: str(total)},
    )


def test_a_node_running_one_member_of_a_gang_is_not_consolidated_alone(solve: SolveFn) -> None:
    # Without the gang, "light" would go: its pod fits on "half".
    half = state_node("half", it=LARGE, pods=[member("t-0", "half"), pod("c", cpu="1", node="half")])
    light = state_node("light", it=LARGE, pods=[member("t-1", "light")])
    result = run([half, light], solve=solve, pools=[node_pool(budgets=[{"nodes": "1"}])])
    assert result.commands == []
    why = blocker(result, "light")
    assert why.kind == BlockerKind.GANG
    assert "gang ml/train runs on 2 nodes, disrupted together or not at all" in why.detail


def test_the_same_nodes_without_a_gang_are_consolidated(solve: SolveFn) -> None:
    half = state_node(
        "half", it=LARGE, pods=[pod("t-0", cpu="1", node="half"), pod("c", cpu="1", node="half")]
    )
    light = state_node("light", it=LARGE, pods=[pod("t-1", cpu="1", node="light")])
    result = run([half, light], solve=solve, pools=[node_pool(budgets=[{"nodes": "1"}])])
    assert [c.node_names for c in result.commands] == [("light",)]


def test_a_gang_on_one_node_is_consolidated_like_any_pod(solve: SolveFn) -> None:
    lonely = state_node("lonely", it=LARGE, pods=[member("t-0", "lonely", total=1)])
    result = run([lonely], solve=solve)
    assert [c.action for c in result.commands] == ["replace"]


def test_other_nodes_are_still_consolidated_beside_a_held_gang(solve: SolveFn) -> None:
    gang_a = state_node("gang-a", it=LARGE, pods=[member("t-0", "gang-a", cpu="5")])
    gang_b = state_node("gang-b", it=LARGE, pods=[member("t-1", "gang-b", cpu="5")])
    idle = state_node("idle", it=LARGE)
    result = run([gang_a, gang_b, idle], solve=solve)
    taken = {n for c in result.commands for n in c.node_names}
    assert "idle" in taken
    assert not taken & {"gang-a", "gang-b"} or {"gang-a", "gang-b"} <= taken


DRIFTED = [{"type": "Drifted", "status": "True"}]


def test_a_drifted_member_replaces_the_whole_gang_in_one_command(solve: SolveFn) -> None:
    a = state_node("gang-a", it=LARGE, pods=[member("t-0", "gang-a", cpu="5")], conditions=DRIFTED)
    b = state_node("gang-b", it=LARGE, pods=[member("t-1", "gang-b", cpu="5")])
    result = run([a, b], solve=solve, pools=[node_pool(budgets=[{"nodes": "100%"}])])
    assert [(c.method, c.node_names) for c in result.commands] == [("drift", ("gang-a", "gang-b"))]
    assert len(result.commands[0].replacements) == 2


def test_a_drifted_gang_waits_when_the_budget_cannot_take_every_member(solve: SolveFn) -> None:
    a = state_node("gang-a", it=LARGE, pods=[member("t-0", "gang-a", cpu="5")], conditions=DRIFTED)
    b = state_node("gang-b", it=LARGE, pods=[member("t-1", "gang-b", cpu="5")])
    result = run([a, b], solve=solve, pools=[node_pool(budgets=[{"nodes": "1"}])])
    assert result.commands == []
    (why,) = [b for b in result.blockers if b.node == "gang-a" and b.method == "drift"]
    assert why.kind == BlockerKind.BUDGET


def test_an_expired_member_takes_the_whole_gang_with_it(solve: SolveFn) -> None:
    old = NOW - timedelta(hours=800)
    a = state_node("gang-a", it=LARGE, pods=[member("t-0", "gang-a", cpu="5")], created=old)
    b = state_node("gang-b", it=LARGE, pods=[member("t-1", "gang-b", cpu="5")])
    result = run([a, b], solve=solve)
    assert [(c.method, c.node_names) for c in result.commands] == [("expiration", ("gang-a", "gang-b"))]
    assert "gang ml/train" in result.commands[0].records[1].detail


def test_a_gang_is_consolidated_as_a_whole_when_its_nodes_together_are_worth_it(solve: SolveFn) -> None:
    # The gang's two small members fit one cheaper node; the busy nodes between them fit nowhere cheaper.
    a = state_node("gang-a", it=LARGE, pods=[member("t-0", "gang-a", cpu="500m")])
    busy = [state_node(f"busy{i}", it=LARGE, pods=[pod(f"b{i}", cpu="7600m")]) for i in (1, 2)]
    b = state_node("gang-b", it=LARGE, pods=[member("t-1", "gang-b", cpu="500m")])
    result = run([a, *busy, b], solve=solve, pools=[node_pool(budgets=[{"nodes": "100%"}])])
    assert [(c.method, c.node_names) for c in result.commands] == [("multi-node", ("gang-a", "gang-b"))]
    assert len(result.commands[0].replacements) == 1


def test_a_whole_gang_is_not_consolidated_beyond_the_budget(solve: SolveFn) -> None:
    a = state_node("gang-a", it=LARGE, pods=[member("t-0", "gang-a", cpu="500m")])
    b = state_node("gang-b", it=LARGE, pods=[member("t-1", "gang-b", cpu="500m")])
    result = run([a, b], solve=solve, pools=[node_pool(budgets=[{"nodes": "1"}])])
    assert result.commands == []
