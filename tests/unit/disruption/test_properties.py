"""Properties of every plan, on random clusters: no do-not-disrupt pod is ever evicted, no PDB is
violated, no pool goes over its budget, and each node is disrupted at most once, by a command whose
records account for every pod it moves."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.api import labels as wk
from provisioner.api.nodepool import NodePool
from provisioner.disruption import plan
from provisioner.disruption.budgets import limit_for
from provisioner.disruption.candidates import disrupting, do_not_disrupt
from provisioner.disruption.pdbs import allowed_disruptions
from provisioner.state.snapshot import Snapshot
from testkit.typed import present
from tests.unit.disruption.builders import NOW, instance_type, node_pool, pdb, pod, snapshot, state_node
from tests.unit.disruption.conftest import real_or_standin

TYPES = [
    instance_type("t.small", cpu=2, memory_gib=8, price=0.1, spot_price=0.04),
    instance_type("t.medium", cpu=4, memory_gib=16, price=0.2, spot_price=0.08),
    instance_type("t.large", cpu=8, memory_gib=32, price=0.4, spot_price=0.15),
]
APPS = ("web", "api", "batch")

pod_st = st.fixed_dictionaries(
    {
        "cpu": st.sampled_from(["250m", "500m", "1", "1500m"]),
        "app": st.sampled_from(APPS),
        "guarded": st.integers(0, 7).map(lambda i: i == 0),
    }
)

node_st = st.fixed_dictionaries(
    {
        "type": st.sampled_from(range(len(TYPES))),
        "pool": st.sampled_from(["a", "b"]),
        "capacity": st.sampled_from(["on-demand", "spot"]),
        "pods": st.lists(pod_st, max_size=4),
        "dnd_node": st.integers(0, 9).map(lambda i: i == 0),
        "deleting": st.integers(0, 14).map(lambda i: i == 0),
    }
)


PDB = tuple[str, tuple[str, object]]
"""(app, (max or min, how many))"""

pdb_st: st.SearchStrategy[PDB] = st.tuples(
    st.sampled_from(APPS), st.sampled_from([("max", 0), ("max", 1), ("min", "50%"), ("min", 1)])
)


def _app(pdb: PDB) -> str:
    return pdb[0]


pdbs_st = st.lists(pdb_st, max_size=3, unique_by=_app)


cluster_st = st.fixed_dictionaries(
    {
        "nodes": st.lists(node_st, min_size=1, max_size=10),
        "budget_a": st.sampled_from(["0", "1", "2", "10%", "50%", "100%"]),
        "budget_b": st.sampled_from(["1", "30%", "100%"]),
        "pdbs": pdbs_st,
    }
)


def build(spec: dict[str, Any]) -> tuple[Snapshot, list[NodePool]]:
    pools = [
        node_pool("a", capacity_types=["spot", "on-demand"], budgets=[{"nodes": spec["budget_a"]}]),
        node_pool("b", capacity_types=["on-demand"], budgets=[{"nodes": spec["budget_b"]}]),
    ]
    nodes = []
    counter = 0
    for i, n in enumerate(spec["nodes"]):
        pods = []
        for p in n["pods"]:
            counter += 1
            annotations = {wk.DO_NOT_DISRUPT: "true"} if p["guarded"] else {}
            pods.append(pod(f"p{counter}", cpu=p["cpu"], labels={"app": p["app"]}, annotations=annotations))
        it = TYPES[n["type"]]
        capacity = n["capacity"] if n["pool"] == "a" else "on-demand"
        nodes.append(
            state_node(
                f"n{i}",
                pool=n["pool"],
                it=it,
                capacity_type=capacity,
                pods=pods,
                node_annotations={wk.DO_NOT_DISRUPT: "true"} if n["dnd_node"] else None,
                deleting=n["deleting"],
            )
        )
    pdbs = []
    for app, (kind, value) in spec["pdbs"]:
        kw = {"max_unavailable": value} if kind == "max" else {"min_available": value}
        pdbs.append(pdb(app, match={"app": app}, **kw))
    return snapshot(nodes, pools=pools, pdbs=pdbs), pools


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_st)
def test_every_plan_respects_do_not_disrupt_pdbs_and_budgets(spec: dict[str, Any]) -> None:
    snap, pools = build(spec)
    types = {p.name: TYPES for p in pools}
    result = plan(snap, instance_types=types, now=NOW, solve=real_or_standin())
    by_name = {n.name: n for n in snap.nodes}

    disrupted = [name for c in result.commands for name in c.node_names]
    assert len(disrupted) == len(set(disrupted)), "a node is in two commands"

    evicted = []
    for command in result.commands:
        recorded = {m.pod for r in command.records for m in r.pods}
        for node in command.nodes:
            original = by_name[node.name]
            assert original.managed and original.initialized and not disrupting(original)
            assert present(original.node).annotations.get(wk.DO_NOT_DISRUPT) != "true"
            for p in original.pods:
                assert not do_not_disrupt(p, NOW), f"do-not-disrupt pod {p.key} evicted"
                assert p.key in recorded
                evicted.append(p)
            # Every moved pod lands on a node that stays, or on a replacement.
            for record in command.records:
                for move in record.pods:
                    assert move.destination.startswith("new:") or move.destination not in set(disrupted)

    for budget in snap.pdbs:
        allowed = allowed_disruptions(budget, snap.bound_pods())
        assert sum(1 for p in evicted if budget.matches(p)) <= allowed, f"PDB {budget.name} violated"

    totals = {p.name: sum(1 for n in snap.nodes if n.nodepool == p.name) for p in pools}
    used = {p.name: sum(1 for n in snap.nodes if n.nodepool == p.name and disrupting(n)) for p in pools}
    pool_by_name = {p.name: p for p in pools}
    for command in result.commands:
        for node in command.nodes:
            used[present(node.nodepool)] += 1
            limit, _ = limit_for(
                pool_by_name[present(node.nodepool)],
                command.reason,
                total=totals[present(node.nodepool)],
                now=NOW,
            )
            assert limit is None or used[present(node.nodepool)] <= limit, "budget exceeded"
