"""Single-node keep-verdicts kept between plans (`Verdicts`): a candidate is re-solved whenever anything
its verdict depends on changed, is not re-solved when nothing did, and a plan with the cache is the plan
without it, over random sequences of changes to a cluster fed through ClusterState (whose snapshots share
the objects that did not change, as the controller's do)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner import scheduling
from provisioner.cloudprovider.types import InstanceType
from provisioner.disruption import DisruptionPlan, Memory, PlannerSettings, plan
from provisioner.state.cluster import ClusterState, Snapshot
from provisioner.state.objects import Pod
from testkit.builders import daemonset, node_pool_manifest
from tests.unit.disruption.builders import NAMESPACE, NOW, instance_type, pod, state_node

SMALL = instance_type("t.small", cpu=2, memory_gib=8, price=0.1)
MEDIUM = instance_type("t.medium", cpu=4, memory_gib=16, price=0.2)
LARGE = instance_type("t.large", cpu=8, memory_gib=32, price=0.4)
XLARGE = instance_type("t.xlarge", cpu=16, memory_gib=64, price=0.8)
SIZES = {"small": SMALL, "medium": MEDIUM, "large": LARGE, "xlarge": XLARGE}
ONLY_SINGLE_NODE = PlannerSettings(multi_node_max_candidates=1)
"""Multi-node consolidation needs two candidates: with one, every re-solve is single-node's."""


class Recording:
    """The real scheduler, noting the pods of every re-solve."""

    def __init__(self) -> None:
        self.solved: list[set[str]] = []

    def __call__(self, pods: Sequence[Pod], snapshot: Snapshot, /, **kw: Any) -> scheduling.Results:
        self.solved.append({p.name for p in pods})
        return scheduling.solve(pods, snapshot, **kw)

    def nodes(self) -> set[str]:
        """The nodes whose pods were re-solved (pods are named `<node>-<n>`)."""
        return {name.rsplit("-", 1)[0] for names in self.solved for name in names}


class World:
    """A cluster in a ClusterState, changed the way the API server changes it (whole objects)."""

    def __init__(self, *, min_savings: str = "1") -> None:
        self.state = ClusterState()
        self.state.upsert(
            "Namespace", {"metadata": {"name": NAMESPACE, "labels": {"provisioner.sh/team": "research"}}}
        )
        self.min_savings = min_savings
        self.touches = 0
        self.pool(min_savings=min_savings)
        self.types: list[InstanceType] = [SMALL, MEDIUM, LARGE, XLARGE]
        self.pods: dict[str, int] = {}
        """Node -> how many pods were ever put on it (pod names stay unique)."""

    def pool(self, *, min_savings: str, status: Mapping[str, Any] | None = None) -> None:
        doc = node_pool_manifest(
            "default",
            requirements=[{"key": "provisioner.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
            disruption={
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "0s",
                "minSavingsPerPodHour": min_savings,
                "budgets": [{"nodes": "100%"}],
            },
        )
        if status is not None:
            doc["status"] = dict(status)
        self.state.upsert("NodePool", doc)

    def node(self, name: str, size: str, *cpus: str, price: float | None = None) -> None:
        sn = state_node(name, it=SIZES[size], price=price)
        assert sn.node is not None and sn.claim is not None
        self.state.upsert("Node", sn.node.raw)
        self.state.upsert("NodeClaim", sn.claim.model_dump(mode="json", by_alias=True, exclude_none=True))
        for cpu in cpus:
            self.add_pod(name, cpu)

    def add_pod(self, node: str, cpu: str) -> None:
        index = self.pods.get(node, 0)
        self.pods[node] = index + 1
        raw = dict(pod(f"{node}-{index}", cpu=cpu, memory="1Gi", labels={"app": "web"}).raw)
        raw["spec"] = {**raw["spec"], "nodeName": node}
        raw["status"] = {"phase": "Running"}
        self.state.upsert("Pod", raw)

    def remove_pod(self, node: str) -> bool:
        names = sorted(p.name for n in self.state.snapshot().nodes if n.name == node for p in n.pods)
        if not names:
            return False
        self.state.remove("Pod", f"{NAMESPACE}/{names[0]}")
        return True

    def touch(self) -> None:
        """A write no verdict depends on (the pool's status, as the nodepool controller rewrites it), so
        the next plan runs instead of repeating the last one whole (`Memory`)."""
        self.touches += 1
        self.pool(min_savings=self.min_savings, status={"resources": {"cpu": str(self.touches)}})

    def reprice(self, node: str, price: float) -> None:
        claim = self.state.snapshot().node(node)
        assert claim is not None and claim.claim is not None
        doc = claim.claim.model_dump(mode="json", by_alias=True, exclude_none=True)
        doc["status"]["pricePerHour"] = price
        self.state.upsert("NodeClaim", doc)

    def remove_node(self, node: str) -> None:
        for n in self.state.snapshot().nodes:
            if n.name == node:
                for p in n.pods:
                    self.state.remove("Pod", p.key)
        self.state.remove("Node", node)
        self.state.remove("NodeClaim", node)

    def plan(
        self,
        *,
        memory: Memory | None = None,
        solve: Callable[..., scheduling.Results] | None = None,
        settings: PlannerSettings = ONLY_SINGLE_NODE,
    ) -> DisruptionPlan:
        return plan(
            self.state.snapshot(),
            instance_types={"default": list(self.types)},
            now=NOW,
            settings=settings,
            solve=solve or scheduling.solve,
            memory=memory,
        )


def canonical(p: DisruptionPlan) -> tuple[object, ...]:
    """What a plan decides: its commands (nodes, replacements, records) and its blockers."""
    commands = [
        (
            c.method,
            c.reason,
            c.node_names,
            [([it.name for it in r.instance_types], r.offering) for r in c.replacements],
            repr(c.records),
        )
        for c in p.commands
    ]
    return (commands, sorted(repr(b) for b in p.blockers), p.evaluated)


def three_kept_nodes() -> World:
    """Three under-used nodes whose pods fit elsewhere or on a cheaper node, but each move saves less
    than the pool's minimum per pod: every single-node re-solve ends in a keep-verdict. c's 5-CPU pod
    fits on no other node (a and b are 4-CPU nodes): they are never shown to its re-solve."""
    world = World(min_savings="1")
    world.node("a", "medium", "1", "1")
    world.node("b", "medium", "1")
    world.node("c", "xlarge", "5")
    return world


def test_a_plan_of_an_unchanged_cluster_reuses_every_keep_verdict() -> None:
    world = three_kept_nodes()
    memory = Memory()
    first = world.plan(memory=memory)
    assert first.solves == 3 and first.reused == 0
    assert {b.kind.value for b in first.blockers if b.method == "single-node"} == {"MinSavings"}
    recording = Recording()
    world.touch()
    again = world.plan(memory=memory, solve=recording)
    # The solve function is part of what verdicts depend on: a new one re-solves everything ...
    assert recording.nodes() == {"a", "b", "c"}
    world.touch()
    third = world.plan(memory=memory, solve=recording)
    # ... and the same one again re-solves nothing.
    assert third.solves == 0 and third.reused == 3
    assert canonical(third) == canonical(again) == canonical(first) == canonical(world.plan())


def _then(
    change: Callable[[World], object], settings: PlannerSettings = ONLY_SINGLE_NODE
) -> Callable[[World], PlannerSettings]:
    def apply(world: World) -> PlannerSettings:
        change(world)
        return settings

    return apply


def _unavailable(world: World) -> None:
    small = world.types[0]
    world.types[0] = dataclasses.replace(
        small, offerings=tuple(dataclasses.replace(o, available=False) for o in small.offerings)
    )


CHANGES = [
    pytest.param(_then(lambda w: w.add_pod("a", "500m")), {"a"}, id="a-pod-joins-the-candidate"),
    pytest.param(_then(lambda w: w.remove_pod("c")), {"a", "b"}, id="a-node-it-may-move-to-empties"),
    pytest.param(_then(lambda w: w.reprice("a", 0.25)), {"a"}, id="the-candidate-claim-changes"),
    pytest.param(_then(lambda w: w.add_pod("b", "250m")), {"a", "b"}, id="a-pod-joins-a-neighbour"),
    pytest.param(_then(lambda w: w.node("d", "large", "1")), {"a", "b", "c", "d"}, id="a-new-node-appears"),
    pytest.param(_then(lambda w: w.remove_node("b")), {"a"}, id="a-neighbour-goes"),
    pytest.param(_then(lambda w: w.pool(min_savings="2")), {"a", "b", "c"}, id="the-pool-spec-changes"),
    pytest.param(_then(_unavailable), {"a", "b", "c"}, id="an-offering-becomes-unavailable"),
    pytest.param(
        _then(lambda w: w.types.__setitem__(0, dataclasses.replace(SMALL, name="t.small2"))),
        {"a", "b", "c"},
        id="an-instance-type-changes",
    ),
    pytest.param(
        _then(lambda w: w.state.upsert("DaemonSet", _daemonset_doc())),
        {"a", "b", "c"},
        id="a-daemonset-appears",
    ),
    pytest.param(
        _then(
            lambda w: w.state.upsert(
                "Namespace", {"metadata": {"name": NAMESPACE, "labels": {"provisioner.sh/team": "vision"}}}
            )
        ),
        {"a", "b", "c"},
        id="namespace-labels-change",
    ),
    pytest.param(
        _then(lambda w: None, PlannerSettings(multi_node_max_candidates=1, nodes_per_pod=1)),
        {"a", "b", "c"},
        id="the-settings-change",
    ),
]


def _daemonset_doc() -> dict[str, Any]:
    ds = daemonset("agent", cpu="100m", memory="128Mi")
    return {
        "metadata": {"name": ds.name, "namespace": ds.namespace},
        "spec": {"template": {"metadata": {"labels": dict(ds.pod.labels)}, "spec": ds.pod.raw["spec"]}},
    }


@pytest.mark.parametrize(("change", "resolved"), CHANGES)
def test_a_change_to_what_a_verdict_depends_on_re_solves_it(
    change: Callable[[World], PlannerSettings], resolved: set[str]
) -> None:
    world = three_kept_nodes()
    memory = Memory()
    recording = Recording()
    world.plan(memory=memory, solve=recording)
    recording.solved.clear()
    settings = change(world)
    cached = world.plan(memory=memory, solve=recording, settings=settings)
    assert resolved <= recording.nodes()
    assert canonical(cached) == canonical(world.plan(solve=recording, settings=settings))


def test_a_change_to_a_node_no_pod_could_move_to_keeps_the_verdict() -> None:
    """c's 5-CPU pod never fits on b: b is not shown to c's re-solve, and a change to b keeps c's verdict."""
    world = three_kept_nodes()
    memory = Memory()
    recording = Recording()
    world.plan(memory=memory, solve=recording)
    recording.solved.clear()
    world.add_pod("b", "250m")
    cached = world.plan(memory=memory, solve=recording)
    assert recording.nodes() == {"a", "b"}
    assert cached.reused == 1
    assert canonical(cached) == canonical(world.plan(solve=recording))


def test_multi_node_attempts_that_failed_are_not_re_solved_either() -> None:
    world = three_kept_nodes()
    memory = Memory()
    first = world.plan(memory=memory, settings=PlannerSettings())
    assert first.solves > 3  # single-node's three and multi-node's prefixes
    world.touch()
    again = world.plan(memory=memory, settings=PlannerSettings())
    assert again.solves == 0 and again.reused == first.solves
    assert canonical(again) == canonical(first)


def test_a_pool_status_change_keeps_the_verdicts() -> None:
    """The nodepool controller rewrites a pool's status as nodes come and go; re-solves never read it."""
    world = three_kept_nodes()
    memory = Memory()
    world.plan(memory=memory)
    world.pool(min_savings="1", status={"resources": {"cpu": "12"}})
    again = world.plan(memory=memory)
    assert again.solves == 0 and again.reused == 3


def test_verdicts_a_plan_did_not_use_are_forgotten_when_the_next_begins() -> None:
    world = three_kept_nodes()
    memory = Memory()
    world.plan(memory=memory)
    assert len(memory.verdicts) == 3
    world.remove_node("c")
    world.plan(memory=memory)
    world.touch()
    world.plan(memory=memory)
    assert len(memory.verdicts) == 2


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("pod"), st.integers(0, 5), st.sampled_from(["250m", "500m", "1", "1500m"])),
        st.tuples(st.just("unpod"), st.integers(0, 5), st.just("")),
        st.tuples(st.just("node"), st.integers(0, 5), st.sampled_from(list(SIZES))),
        st.tuples(st.just("gone"), st.integers(0, 5), st.just("")),
        st.tuples(st.just("price"), st.integers(0, 5), st.sampled_from(["0.05", "0.3", "0.5", "1"])),
        st.tuples(st.just("savings"), st.just(0), st.sampled_from(["0", "0.05", "0.1"])),
        st.tuples(st.just("offering"), st.integers(0, 3), st.booleans().map(str)),
    ),
    min_size=1,
    max_size=4,
)


def _step(world: World, step: tuple[str, int, str]) -> None:
    kind, index, arg = step
    name = f"n{index}"
    present = world.state.snapshot().node(name) is not None
    if kind == "pod" and present:
        world.add_pod(name, arg)
    elif kind == "unpod" and present:
        world.remove_pod(name)
    elif kind == "node" and not present:
        world.node(name, arg, "500m", "250m")
    elif kind == "gone" and present:
        world.remove_node(name)
    elif kind == "price" and present:
        world.reprice(name, float(arg))
    elif kind == "savings":
        world.pool(min_savings=arg)
    elif kind == "offering":
        it = world.types[index]
        world.types[index] = dataclasses.replace(
            it, offerings=tuple(dataclasses.replace(o, available=arg == "True") for o in it.offerings)
        )


CPUS = st.sampled_from(["250m", "500m", "1", "1500m", "3"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.sampled_from(list(SIZES)), min_size=2, max_size=6),
    loads=st.lists(st.lists(CPUS, min_size=1, max_size=5), min_size=6, max_size=6),
    min_savings=st.sampled_from(["0.02", "0.05", "0.1"]),
    rounds=st.lists(STEPS, min_size=1, max_size=5),
    per_pod=st.sampled_from([1, 2, 16, None]),
)
def test_cached_and_uncached_plans_agree_over_random_changes(
    sizes: list[str],
    loads: list[list[str]],
    min_savings: str,
    rounds: list[list[tuple[str, int, str]]],
    per_pod: int | None,
) -> None:
    world = World(min_savings=min_savings)
    for i, size in enumerate(sizes):
        world.node(f"n{i}", size, *loads[i])
    config = PlannerSettings(nodes_per_pod=per_pod)
    memory = Memory()
    assert canonical(world.plan(memory=memory, settings=config)) == canonical(world.plan(settings=config))
    for steps in rounds:
        for step in steps:
            _step(world, step)
        cached = world.plan(memory=memory, settings=config)
        assert canonical(cached) == canonical(world.plan(settings=config))
