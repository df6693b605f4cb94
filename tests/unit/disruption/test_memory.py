"""The last plan handed back whole (`Memory`, `DisruptionPlan.repeated`): a plan of the very same inputs at
a moment no time rule of the planner changes its answer is the last plan; any change to what a plan reads, and
every time rule crossing its moment (consolidateAfter, expireAfter, do-not-disrupt, budget windows,
Capacity Block ends), plans again, and the plan is then the one made without the memory."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.cloudprovider.types import InstanceType, Offering, Reservation
from provisioner.disruption import DisruptionPlan, Memory, PlannerSettings, nodepool_hash, plan
from provisioner.disruption.facts import Facts, NodeFacts
from provisioner.scheduling import SolveFn
from provisioner.state.cluster import Snapshot, StateNode
from testkit.builders import pools as kit_pools
from testkit.builders.pods import daemonset
from testkit.builders.pools import aws_node_class
from tests.unit.disruption.builders import (
    NAMESPACE,
    NOW,
    instance_type,
    node_pool,
    pdb,
    pod,
    snapshot,
    state_node,
)
from tests.unit.disruption.test_verdicts import canonical

SMALL = instance_type("m.small", cpu=2, memory_gib=8, price=0.10)
LARGE = instance_type("m.large", cpu=8, memory_gib=32, price=0.40)
WEB = {"app": "web"}


@dataclasses.dataclass
class Inputs:
    """What a plan is given besides `now` and the memory; `with_` makes the changed copy."""

    snapshot: Snapshot
    types: dict[str, list[InstanceType]]
    settings: PlannerSettings = dataclasses.field(default_factory=PlannerSettings)
    solve: Callable[..., Any] | None = None
    pools: Sequence[Any] | None = None

    def plan(self, at: datetime, memory: Memory | None = None) -> DisruptionPlan:
        return plan(
            self.snapshot,
            instance_types=self.types,
            now=at,
            settings=self.settings,
            solve=self.solve,
            pools=self.pools,
            memory=memory,
        )

    def with_(self, **changes: Any) -> Inputs:
        return dataclasses.replace(self, **changes)

    def with_node(self, node: StateNode) -> Inputs:
        """The node of that name replaced (the others the very same objects)."""
        nodes = tuple(node if n.name == node.name else n for n in self.snapshot.nodes)
        return self.with_(snapshot=dataclasses.replace(self.snapshot, nodes=nodes))


def node_a(**kw: Any) -> StateNode:
    """An under-used node whose one pod fits on b: consolidation deletes it."""
    kw.setdefault("pods", [pod("a-0", cpu="1", labels=WEB)])
    return state_node("a", it=LARGE, claim_annotations={wk.NODECLASS_HASH: "stamped"}, **kw)


def node_b() -> StateNode:
    return state_node("b", it=LARGE, pods=[pod("b-0", cpu="4")])


def two_nodes(solve: Callable[..., Any], *, pool: Any = None, a: StateNode | None = None) -> Inputs:
    pool = pool or node_pool(budgets=[{"nodes": "100%"}])
    return Inputs(
        snapshot=snapshot([a or node_a(), node_b()], pools=[pool]),
        types={pool.name: [SMALL, LARGE]},
        solve=solve,
    )


def test_an_unchanged_cluster_is_planned_once_and_the_plan_handed_back(solve: SolveFn) -> None:
    inputs = two_nodes(solve)
    memory = Memory()
    first = inputs.plan(NOW, memory)
    assert [c.node_names for c in first.commands] == [("a",)] and not first.repeated
    later = NOW + timedelta(hours=5)
    again = inputs.plan(later, memory)
    assert again.repeated and again.solves == 0 and again.now == later
    assert canonical(again) == canonical(first) == canonical(inputs.plan(later))


def _join_a(i: Inputs) -> Inputs:
    return i.with_node(node_a(pods=[pod("a-0", cpu="1", labels=WEB), pod("a-1", cpu="4")]))


def _pending(i: Inputs) -> Inputs:
    waiting = pod("waiting", cpu="6")
    return i.with_(snapshot=dataclasses.replace(i.snapshot, pending_pods=(waiting,)))


def _pdb(i: Inputs) -> Inputs:
    guard = pdb("web", match=WEB, max_unavailable=0)
    return i.with_(snapshot=dataclasses.replace(i.snapshot, pdbs=(guard,)))


def _policy(i: Inputs) -> Inputs:
    pool = node_pool(policy="WhenEmpty")
    return i.with_(snapshot=dataclasses.replace(i.snapshot, nodepools=(pool,)))


def _requirements(i: Inputs) -> Inputs:
    """Requirements are not in the pool's hash: only the new pool object says a's type drifted from it."""
    pool = kit_pools.node_pool(
        "default",
        requirements=[
            kit_pools.req(wk.CAPACITY_TYPE, "In", "on-demand"),
            kit_pools.req(wk.INSTANCE_TYPE, "In", "m.small"),
        ],
        expire_after="720h",
        disruption={
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": "0s",
            "budgets": [{"nodes": "100%"}],
        },
    )
    assert nodepool_hash(pool) == nodepool_hash(i.snapshot.nodepools[0])
    return i.with_(snapshot=dataclasses.replace(i.snapshot, nodepools=(pool,)))


def _pool_gone(i: Inputs) -> Inputs:
    return i.with_(pools=[])


def _nodeclass(i: Inputs) -> Inputs:
    classes = {("AWSNodeClass", "default"): aws_node_class()}
    return i.with_(snapshot=dataclasses.replace(i.snapshot, nodeclasses=classes))


def _team(i: Inputs) -> Inputs:
    return i.with_(snapshot=dataclasses.replace(i.snapshot, namespaces={NAMESPACE: {wk.TEAM: "vision"}}))


def _daemonset(i: Inputs) -> Inputs:
    return i.with_(snapshot=dataclasses.replace(i.snapshot, daemonsets=(daemonset("agent", cpu="100m"),)))


def _cheaper_type(i: Inputs) -> Inputs:
    cheap = dataclasses.replace(
        LARGE, offerings=tuple(dataclasses.replace(o, price=0.05) for o in LARGE.offerings)
    )
    return i.with_(types={"default": [SMALL, cheap]})


def _settings(i: Inputs) -> Inputs:
    return i.with_(settings=PlannerSettings(max_commands=0))


def _solve(i: Inputs) -> Inputs:
    assert i.solve is not None
    inner = i.solve

    def another(*args: Any, **kw: Any) -> Any:
        return inner(*args, **kw)

    return i.with_(solve=another)


@pytest.mark.parametrize(
    ("change", "changes_the_plan"),
    [
        pytest.param(_join_a, True, id="a-pod-joins-a-node"),
        pytest.param(_pending, True, id="a-pending-pod-can-land"),
        pytest.param(_pdb, True, id="a-pdb-appears"),
        pytest.param(_policy, True, id="the-pool-changes"),
        pytest.param(_requirements, True, id="the-pool-requirements-change"),
        pytest.param(_pool_gone, True, id="the-pools-given-change"),
        pytest.param(_nodeclass, True, id="a-node-class-changes"),
        pytest.param(_team, True, id="namespace-labels-change"),
        pytest.param(_cheaper_type, True, id="an-offering-changes"),
        pytest.param(_settings, True, id="the-settings-change"),
        pytest.param(_daemonset, False, id="a-daemonset-appears"),
        pytest.param(_solve, False, id="the-solve-function-changes"),
    ],
)
def test_a_change_to_what_a_plan_reads_plans_again(
    solve: SolveFn, change: Callable[[Inputs], Inputs], changes_the_plan: bool
) -> None:
    inputs = two_nodes(solve)
    memory = Memory()
    first = inputs.plan(NOW, memory)
    changed = change(inputs)
    again = changed.plan(NOW, memory)
    assert not again.repeated
    assert canonical(again) == canonical(changed.plan(NOW))
    assert (canonical(again) != canonical(first)) is changes_the_plan


@dataclasses.dataclass(frozen=True)
class Boundary:
    """A cluster whose plan changes at `at` (and not in the second before)."""

    build: Callable[[Callable[..., Any]], Inputs]
    at: datetime


def _settling(solve: Callable[..., Any]) -> Inputs:
    return two_nodes(solve, pool=node_pool(consolidate_after="10m"), a=node_a(last_pod_event=NOW))


def _emptying(solve: Callable[..., Any]) -> Inputs:
    pool = node_pool(consolidate_after="10m")
    empty = state_node("empty", it=LARGE, last_pod_event=NOW)
    return Inputs(snapshot=snapshot([empty, node_b()], pools=[pool]), types={pool.name: [LARGE]}, solve=solve)


def _expiring(solve: Callable[..., Any]) -> Inputs:
    old = state_node(
        "old", it=LARGE, pods=[pod("o-0", cpu="6")], created=NOW - timedelta(hours=23), expire_after="24h"
    )
    pool = node_pool()
    return Inputs(snapshot=snapshot([old], pools=[pool]), types={pool.name: [LARGE]}, solve=solve)


def _protected(solve: Callable[..., Any]) -> Inputs:
    guarded = pod("a-0", cpu="1", annotations={wk.DO_NOT_DISRUPT: "30m"}, started=NOW)
    return two_nodes(solve, a=node_a(pods=[guarded]))


def _budgeted(solve: Callable[..., Any]) -> Inputs:
    """No node may go from 13:00 to 14:00 (NOW is noon)."""
    window = {"nodes": "0", "schedule": "0 13 * * *", "duration": "1h"}
    return two_nodes(solve, pool=node_pool(budgets=[window]))


def _block(solve: Callable[..., Any]) -> Inputs:
    ends = NOW + timedelta(hours=3)
    block = Reservation(id="cb-1", kind="capacity-block", total=1, free=0, ends_at=ends, hourly_price=0.4)
    offer = Offering(
        zone="zone-a", capacity_type=wk.CAPACITY_TYPE_RESERVED, price=0.0, available=False, reservation=block
    )
    large = dataclasses.replace(LARGE, offerings=(*LARGE.offerings, offer))
    node = state_node(
        "blk",
        it=large,
        capacity_type=wk.CAPACITY_TYPE_RESERVED,
        pods=[pod("k-0", cpu="6")],
        labels={wk.CAPACITY_RESERVATION_ID: "cb-1"},
    )
    pool = node_pool(capacity_types=("reserved", "on-demand"))
    return Inputs(snapshot=snapshot([node], pools=[pool]), types={pool.name: [large]}, solve=solve)


BOUNDARIES = [
    pytest.param(Boundary(_settling, NOW + timedelta(minutes=10)), id="consolidate-after-passes"),
    pytest.param(Boundary(_emptying, NOW + timedelta(minutes=10)), id="empty-for-consolidate-after"),
    pytest.param(Boundary(_expiring, NOW + timedelta(hours=1)), id="expire-after-passes"),
    pytest.param(Boundary(_protected, NOW + timedelta(minutes=30)), id="do-not-disrupt-lapses"),
    pytest.param(Boundary(_budgeted, NOW + timedelta(hours=1)), id="a-budget-window-opens"),
    pytest.param(Boundary(_budgeted, NOW + timedelta(hours=2)), id="a-budget-window-closes"),
    pytest.param(Boundary(_block, NOW + timedelta(hours=2)), id="a-capacity-block-nears-its-end"),
]


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_a_time_rule_crossing_the_plans_moment_plans_again(solve: SolveFn, boundary: Boundary) -> None:
    inputs = boundary.build(solve)
    before = boundary.at - timedelta(minutes=1)
    memory = Memory()
    first = inputs.plan(before - timedelta(seconds=1), memory)
    assert inputs.plan(before, memory).repeated
    at = inputs.plan(boundary.at, memory)
    assert not at.repeated
    assert canonical(at) == canonical(inputs.plan(boundary.at))
    assert canonical(at) != canonical(first)


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_a_moment_before_a_rule_the_last_plan_saw_crossed_plans_again(
    solve: SolveFn, boundary: Boundary
) -> None:
    inputs = boundary.build(solve)
    memory = Memory()
    first = inputs.plan(boundary.at, memory)
    earlier = inputs.plan(boundary.at - timedelta(seconds=1), memory)
    assert not earlier.repeated
    assert canonical(earlier) == canonical(inputs.plan(boundary.at - timedelta(seconds=1)))
    assert canonical(earlier) != canonical(first)


def test_facts_are_kept_for_the_nodes_of_the_next_plan_and_dropped_for_the_others() -> None:
    node, other = node_a(), node_b()
    facts = Facts()
    facts.start([node, other])
    first, second = facts.of(node), facts.of(other)
    assert facts.of(node) is first
    facts.start([node])
    assert facts.of(node) is first  # the plan before saw it
    assert facts.of(node_a()) is not first  # an equal node, but another StateNode: its own facts
    facts.start([node, other])
    assert facts.of(other) is not second  # the plan in between did not see it


def test_no_facts_outlive_the_plan_that_replaced_their_node() -> None:
    """A node replaced since the last plan must not stay alive through its facts (with all its pods: at
    30,000 pods a whole generation of them)."""
    old = node_a()
    facts = Facts()
    facts.start([old])
    facts.of(old)
    facts.start([node_a()])
    assert not [r for r in gc.get_referrers(old) if isinstance(r, NodeFacts)]


def test_a_plan_leaves_no_cycle_behind_so_its_bookkeeping_goes_when_it_is_made(solve: SolveFn) -> None:
    # A plan re-solves its candidates (unbound copies of their pods, the view's targets, a blocker per
    # node): all of it must go by reference counting when the plan is returned, not wait for the cyclic
    # collector (on 100,000 pods, hundreds of megabytes between two collections).
    inputs = two_nodes(solve, a=node_a(pods=[pod("a-0", cpu="6", labels=WEB)]))
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        made = inputs.plan(NOW, Memory())
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert made.solves >= 1, "the plan re-solved a candidate"
    assert not {"Context", "SolverView", "Blocker", "Pod", "StateNode"} & set(left), left


def test_a_pool_status_write_keeps_the_drift_verdicts_and_new_requirements_drop_them(solve: SolveFn) -> None:
    inputs = two_nodes(solve)
    memory = Memory()
    inputs.plan(NOW, memory)
    a = inputs.snapshot.nodes[0]
    verdict = memory.facts.of(a).drift
    assert verdict is not None and verdict[1] is None, "a meets its pool: not drifted"
    # A status write makes a new pool object that shares its spec (`clusterapi.in_memory.merged`).
    (pool,) = inputs.snapshot.nodepools
    written = inputs.with_(snapshot=dataclasses.replace(inputs.snapshot, nodepools=(pool.model_copy(),)))
    written.plan(NOW + timedelta(minutes=1), memory)
    assert memory.facts.of(a).drift is verdict
    _requirements(inputs).plan(NOW + timedelta(minutes=2), memory)
    again = memory.facts.of(a).drift
    assert again is not verdict and again is not None and again[1] is not None, "a's type no longer allowed"
