"""Properties that hold for every input (hypothesis): taints are respected, limits are never exceeded,
every pod ends in exactly one place, DoNotSchedule spreads never exceed maxSkew, nodes are never
over-committed."""

from __future__ import annotations

from collections import Counter, defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.api import labels as wk
from provisioner.api.nodepool import NodePool
from provisioner.scheduling.results import Results
from provisioner.state.objects import Node, Pod, TaintValue, tolerates_all
from testkit.builders import ZONES, cpu_types, node, node_pool, pod, run, snapshot

TAINTS = [
    {"key": "gpu", "value": "true", "effect": "NoSchedule"},
    {"key": "team", "value": "ml", "effect": "NoSchedule"},
    {"key": "spot", "effect": "NoExecute"},
]
TOLERATIONS = [
    {"key": "gpu", "operator": "Exists"},
    {"key": "team", "operator": "Equal", "value": "ml"},
    {"key": "spot", "operator": "Exists", "effect": "NoExecute"},
    {"operator": "Exists"},
]
CPUS = ["100m", "500m", "1", "1500m", "3", "6", "12"]


Scenario = tuple[list[NodePool], list[tuple[Node, list[Pod]]], list[Pod]]
"""The pools, the nodes with their pods, and the pending pods of one drawn case."""


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    n_pools = draw(st.integers(1, 3))
    pools = []
    for i in range(n_pools):
        taints = draw(st.lists(st.sampled_from(range(len(TAINTS))), max_size=2, unique=True))
        limit = draw(st.one_of(st.none(), st.integers(0, 40)))
        pools.append(
            node_pool(
                f"pool-{i}",
                weight=draw(st.one_of(st.none(), st.integers(1, 100))),
                taints=[TAINTS[t] for t in taints],
                limits={"cpu": str(limit)} if limit is not None else None,
            )
        )
    nodes: list[tuple[Node, list[Pod]]] = []
    for i in range(draw(st.integers(0, 3))):
        taints = draw(st.lists(st.sampled_from(range(len(TAINTS))), max_size=1, unique=True))
        n = node(
            f"node-{i}",
            cpu=draw(st.sampled_from([2, 4, 8])),
            zone=draw(st.sampled_from(ZONES)),
            pool=draw(st.sampled_from([p.name for p in pools])),
            taints=[TAINTS[t] for t in taints],
        )
        nodes.append((n, []))
    pods = []
    for i in range(draw(st.integers(1, 25))):
        tolerations = draw(st.lists(st.sampled_from(range(len(TOLERATIONS))), max_size=2, unique=True))
        app = draw(st.sampled_from(["a", "b"]))
        spread = draw(
            st.one_of(
                st.none(),
                st.tuples(st.sampled_from([wk.ZONE, wk.HOSTNAME]), st.integers(1, 2)),
            )
        )
        constraints = []
        if spread is not None:
            # One constraint shape per app label keeps the skew property well defined.
            key = wk.ZONE if app == "a" else wk.HOSTNAME
            constraints = [
                {
                    "maxSkew": 1 if app == "a" else 2,
                    "topologyKey": key,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ]
        if constraints and app == "a":
            # Zone-spread pods tolerate every taint, so every zone is a domain they could reach (spread
            # domains are per pod: with different reach, pods of one group could not share a skew).
            tolerations = [3]
        pools_annotation = draw(
            st.one_of(
                st.just(()), st.lists(st.sampled_from([p.name for p in pools]), max_size=2, unique=True)
            )
        )
        pods.append(
            pod(
                f"p{i}",
                cpu=draw(st.sampled_from(CPUS)),
                memory=draw(st.sampled_from(["256Mi", "1Gi", "4Gi"])),
                labels={"app": app, "spread": "yes" if constraints else "no"},
                tolerations=[TOLERATIONS[t] for t in tolerations],
                spread=constraints,
                pools=tuple(pools_annotation),
            )
        )
    return pools, nodes, pods


def solve_scenario(pools: list[NodePool], nodes: list[tuple[Node, list[Pod]]], pods: list[Pod]) -> Results:
    types = {p.name: cpu_types() for p in pools}
    return run(pods, pools, types, snap=snapshot(nodes))


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(scenarios())
def test_every_pod_is_accounted_for_exactly_once(case: Scenario) -> None:
    pools, nodes, pods = case
    results = solve_scenario(pools, nodes, pods)
    seen = Counter(p.pod.key for p in results.placements)
    seen.update(p.key for c in results.new_claims for p in c.pods)
    seen.update(u.pod.key for u in results.unschedulable)
    assert seen == Counter(p.key for p in pods)
    for u in results.unschedulable:
        assert u.reasons and all(r.reason for r in u.reasons)


@SETTINGS
@given(scenarios())
def test_no_pod_lands_where_a_taint_is_not_tolerated(case: Scenario) -> None:
    pools, nodes, pods = case
    results = solve_scenario(pools, nodes, pods)
    node_taints = {n.name: n.taints for n, _ in nodes}
    for placement in results.placements:
        assert tolerates_all(placement.pod.tolerations, node_taints[placement.node]) is None
    for claim in results.new_claims:
        nc = claim.to_nodeclaim("x")
        taints = tuple(TaintValue(t.key, t.effect.value, t.value) for t in nc.spec.taints)
        for p in claim.pods:
            assert tolerates_all(p.tolerations, taints) is None


@SETTINGS
@given(scenarios())
def test_pool_limits_are_never_exceeded(case: Scenario) -> None:
    pools, nodes, pods = case
    results = solve_scenario(pools, nodes, pods)
    used: dict[str | None, int] = defaultdict(int)
    for n, _ in nodes:
        used[n.nodepool] += n.capacity["cpu"]
    for claim in results.new_claims:
        used[claim.nodepool.name] += claim.instance_type.capacity["cpu"]
    for p in pools:
        limit = p.spec.limits_base_units().get("cpu")
        if limit is None:
            continue
        existing = sum(n.capacity["cpu"] for n, _ in nodes if n.nodepool == p.name)
        # Limits bind new capacity; existing nodes may already be over (then nothing new is added).
        assert used[p.name] <= max(limit, existing)


@SETTINGS
@given(scenarios())
def test_do_not_schedule_spread_never_exceeds_max_skew(case: Scenario) -> None:
    pools, nodes, pods = case
    results = solve_scenario(pools, nodes, pods)
    zone_counts: Counter[str] = Counter()
    host_counts: Counter[str] = Counter()
    node_zone = {n.name: n.labels[wk.ZONE] for n, _ in nodes}
    for placement in results.placements:
        if placement.pod.labels["app"] == "a":
            zone_counts[node_zone[placement.node]] += 1
        else:
            host_counts[placement.node] += 1
    for claim in results.new_claims:
        for p in claim.pods:
            if p.labels["app"] == "a":
                zone_counts[claim.offering.zone] += 1
            else:
                host_counts[claim.hostname] += 1
    spread_pods = [p for p in pods if p.topology_spread]
    if any(p.labels["app"] == "a" for p in spread_pods) and all(
        p.topology_spread for p in pods if p.labels["app"] == "a"
    ):
        assert max(zone_counts[z] for z in ZONES) - min(zone_counts[z] for z in ZONES) <= 1
    if all(p.topology_spread for p in pods if p.labels["app"] == "b"):
        assert all(c <= 2 for c in host_counts.values())


@SETTINGS
@given(scenarios())
def test_nodes_are_never_over_committed(case: Scenario) -> None:
    pools, nodes, pods = case
    results = solve_scenario(pools, nodes, pods)
    on_node: Counter[str] = Counter()
    for placement in results.placements:
        on_node[placement.node] += placement.pod.requests["cpu"]
    for n, _ in nodes:
        assert on_node[n.name] <= n.allocatable["cpu"]
    for claim in results.new_claims:
        total = sum(p.requests["cpu"] for p in claim.pods)
        assert all(t.allocatable["cpu"] >= total for t in claim.instance_types)
        assert claim.offering.available and claim.offering in claim.instance_type.offerings
