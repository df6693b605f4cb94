"""The scheduler's semantics, one behaviour per test (issue 3, item 1)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodepool import NodePool
from provisioner.cloudprovider import Offering
from provisioner.cloudprovider.types import InstanceType
from provisioner.scheduling import Results, SolveOptions
from provisioner.state.cluster import Snapshot, StateNode
from testkit.builders import (
    ZONES,
    claim_of,
    cpu_types,
    daemonset,
    gpu_pod,
    gpu_types,
    instance_type,
    node,
    node_pool,
    offerings,
    pod,
    reasons_of,
    req,
    run,
    snapshot,
    spread,
    term,
)
from testkit.typed import present

GPU_TAINT = {"key": wk.GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}


def gpu_pool(name: str = "gpu", **kw: Any) -> NodePool:
    kw.setdefault("taints", [GPU_TAINT])
    return node_pool(name, **kw)


def accounted(results: Results) -> Counter[str]:
    keys = [p.pod.key for p in results.placements]
    keys += [p.key for c in results.new_claims for p in c.pods]
    keys += [u.pod.key for u in results.unschedulable]
    return Counter(keys)


# ------------------------------------------------------------------------------------------ resources


def test_allocatable_is_capacity_minus_overhead() -> None:
    # m.large has 2 cpu but 100m is reserved, so a 2-cpu pod needs the next size.
    results = run([pod("p", cpu="2")])
    assert results.new_claims[0].instance_type.name == "m.xlarge"


def test_init_container_peak_counts_when_larger_than_the_containers() -> None:
    p = pod("p", cpu="1", init_containers=[{"name": "init", "resources": {"requests": {"cpu": "3"}}}])
    assert p.requests["cpu"] == 3000
    assert run([p]).new_claims[0].instance_type.name == "m.xlarge"


def test_pod_overhead_is_added_to_requests() -> None:
    p = pod("p", cpu="1800m", overhead={"cpu": "200m"})
    assert run([p]).new_claims[0].instance_type.name == "m.xlarge"


def test_daemonset_overhead_is_reserved_on_new_nodes() -> None:
    ds = daemonset(cpu="500m")
    # 3.5 cpu fits m.xlarge (3.9 allocatable) alone, not with the 500m daemonset.
    results = run([pod("p", cpu="3500m")], daemonsets=[ds])
    claim = results.new_claims[0]
    assert claim.instance_type.name == "m.2xlarge"
    assert claim.requests["cpu"] == 4000


def test_daemonset_that_does_not_tolerate_the_pool_taint_takes_nothing() -> None:
    ds = daemonset(cpu="500m")
    results = run(
        [pod("p", cpu="3500m", tolerations=[{"key": "dedicated", "operator": "Exists"}])],
        node_pool(taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
        daemonsets=[ds],
    )
    assert results.new_claims[0].instance_type.name == "m.xlarge"


def test_daemonset_selecting_other_nodes_takes_nothing() -> None:
    ds = daemonset(cpu="500m", node_selector={wk.GPU_NAME: "h100"})
    results = run([pod("p", cpu="3500m")], daemonsets=[ds])
    assert results.new_claims[0].instance_type.name == "m.xlarge"


def test_max_pods_limits_how_many_pods_share_a_node() -> None:
    types = [instance_type("tiny", cpu=64, memory_gib=256, pods=2)]
    results = run([pod(f"p{i}", cpu="100m", memory="100Mi") for i in range(5)], types=types)
    assert len(results.new_claims) == 3
    assert all(len(c.pods) <= 2 for c in results.new_claims)


def test_extended_resources_are_requested_and_matched() -> None:
    types = [
        instance_type("plain", cpu=8),
        instance_type("fpga", cpu=8, extra={"example.com/fpga": 2}, price=5),
    ]
    results = run([pod("p", extra_requests={"example.com/fpga": "1"})], types=types)
    assert results.new_claims[0].instance_type.name == "fpga"


def test_pods_share_a_node_when_that_is_cheaper() -> None:
    results = run([pod("a", cpu="1"), pod("b", cpu="1")])
    assert len(results.new_claims) == 1
    assert results.new_claims[0].instance_type.name == "m.xlarge"


def test_a_pod_does_not_join_a_node_when_its_own_node_is_cheaper() -> None:
    # 3 cpu on m.xlarge (0.08); adding 1 cpu would need m.2xlarge (+0.08) but m.large costs 0.04 alone.
    results = run([pod("big", cpu="3"), pod("small", cpu="1")])
    assert sorted(c.instance_type.name for c in results.new_claims) == ["m.large", "m.xlarge"]


def test_first_fit_packing_when_cost_aware_packing_is_off() -> None:
    results = run(
        [pod("big", cpu="3"), pod("small", cpu="1")], options=SolveOptions(cost_aware_packing=False)
    )
    assert [c.instance_type.name for c in results.new_claims] == ["m.2xlarge"]


# ------------------------------------------------------------------------------------- node selection


def test_node_selector_picks_the_type() -> None:
    results = run([pod("p", node_selector={wk.INSTANCE_TYPE: "m.2xlarge"})])
    assert results.new_claims[0].instance_types[0].name == "m.2xlarge"
    assert [t.name for t in results.new_claims[0].instance_types] == ["m.2xlarge"]


def test_node_selector_on_a_pool_label() -> None:
    pools = [node_pool("a", labels={"team": "a"}), node_pool("b", labels={"team": "b"})]
    results = run([pod("p", node_selector={"team": "b"})], pools)
    assert results.new_claims[0].nodepool.name == "b"
    assert (
        "the pool's team In [a]" in reasons_of(run([pod("q", node_selector={"team": "c"})], pools), "q")["a"]
    )


def test_node_selector_on_a_label_no_pool_sets_is_unschedulable() -> None:
    results = run([pod("p", node_selector={"disk": "ssd"})])
    assert "do not carry label disk" in reasons_of(results, "p")["default"]


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [
        ("In", ["4"], "m.xlarge"),
        ("NotIn", ["2"], "m.xlarge"),
        ("Gt", ["4"], "m.2xlarge"),
        ("Lt", ["16"], "m.large"),
        ("Exists", [], "m.large"),
    ],
    ids=["in", "not-in", "gt", "lt", "exists"],
)
def test_required_node_affinity_operators(operator: str, values: list[str], expected: str) -> None:
    p = pod("p", cpu="500m", required=[[req(wk.INSTANCE_CPU, operator, *values)]])
    assert run([p]).new_claims[0].instance_type.name == expected


def test_does_not_exist_excludes_types_carrying_the_label() -> None:
    types = cpu_types() + gpu_types()
    p = pod("p", cpu="500m", required=[[req(wk.GPU_NAME, "DoesNotExist")]])
    claim = run([p], types=types).new_claims[0]
    assert all(t.gpu is None for t in claim.instance_types)


def test_required_node_affinity_terms_are_ored() -> None:
    p = pod(
        "p",
        required=[[req(wk.INSTANCE_TYPE, "In", "nonexistent")], [req(wk.INSTANCE_TYPE, "In", "m.4xlarge")]],
    )
    assert run([p]).new_claims[0].instance_type.name == "m.4xlarge"


def test_preferred_node_affinity_is_honoured_when_possible() -> None:
    p = pod("p", preferred=[(10, [req(wk.ZONE, "In", "zone-b")])])
    assert run([p]).new_claims[0].offering.zone == "zone-b"


def test_preferred_node_affinity_is_relaxed_when_it_cannot_be_met() -> None:
    p = pod("p", preferred=[(10, [req(wk.ZONE, "In", "zone-x")])])
    results = run([p])
    assert not results.unschedulable
    assert results.new_claims[0].offering.zone in ZONES


def test_heavier_preference_wins() -> None:
    p = pod("p", preferred=[(1, [req(wk.ZONE, "In", "zone-a")]), (50, [req(wk.ZONE, "In", "zone-c")])])
    assert run([p]).new_claims[0].offering.zone == "zone-c"


# --------------------------------------------------------------------------------------------- taints


def test_pool_taint_not_tolerated_is_the_reason() -> None:
    results = run([pod("p")], gpu_pool(), types=gpu_types())
    assert reasons_of(results, "p") == {"gpu": "taint nvidia.com/gpu=true:NoSchedule is not tolerated"}


def test_tolerated_taint_lets_the_pod_in() -> None:
    results = run([gpu_pod("p", gpus=1, gpu_name="l4")], gpu_pool(), types=gpu_types())
    assert results.new_claims[0].instance_type.name == "g.l4x1"


def test_startup_taints_do_not_block() -> None:
    pool = node_pool(startup_taints=[{"key": "driver-not-ready", "effect": "NoSchedule"}])
    results = run([pod("p")], pool)
    assert not results.unschedulable
    nodeclaim = results.new_claims[0].to_nodeclaim("c1")
    assert nodeclaim.spec.startup_taints[0].key == "driver-not-ready"


def test_prefer_no_schedule_taint_does_not_block() -> None:
    pool = node_pool(taints=[{"key": "soft", "effect": "PreferNoSchedule"}])
    assert not run([pod("p")], pool).unschedulable


def test_existing_node_taint_is_respected() -> None:
    n = node("tainted", taints=[{"key": "x", "effect": "NoSchedule"}])
    results = run([pod("p", cpu="500m")], snap=snapshot([(n, [])]))
    assert not results.placements
    assert len(results.new_claims) == 1


# ------------------------------------------------------------------------------------------- topology


def test_zone_spread_puts_one_pod_per_zone() -> None:
    pods = [pod(f"p{i}", labels={"app": "web"}, spread=[spread(app="web")]) for i in range(3)]
    results = run(pods)
    assert sorted(c.offering.zone for c in results.new_claims) == list(ZONES)


def test_zone_spread_keeps_max_skew_with_more_pods_than_zones() -> None:
    pods = [pod(f"p{i}", cpu="100m", labels={"app": "web"}, spread=[spread(app="web")]) for i in range(7)]
    results = run(pods)
    per_zone = Counter(c.offering.zone for c in results.new_claims for _ in c.pods)
    assert max(per_zone.values()) - min(per_zone.values()) <= 1
    assert sum(per_zone.values()) == 7


def test_zone_spread_counts_existing_pods() -> None:
    existing = [pod(f"old{i}", labels={"app": "web"}, node_name="n1") for i in range(2)]
    n1 = node("n1", zone="zone-a", cpu=2, memory_gib=4)
    pods = [pod("new", labels={"app": "web"}, spread=[spread(app="web")])]
    results = run(pods, snap=snapshot([(n1, existing)]))
    assert results.new_claims[0].offering.zone != "zone-a"


def test_zone_spread_claim_requirements_name_the_zone() -> None:
    pods = [pod(f"p{i}", labels={"app": "web"}, spread=[spread(app="web")]) for i in range(2)]
    for claim in run(pods).new_claims:
        zone_reqs = [r for r in claim.requirements if r.key == wk.ZONE]
        assert zone_reqs and zone_reqs[0].values == [claim.offering.zone]


def test_hostname_spread_puts_each_pod_on_its_own_node() -> None:
    pods = [
        pod(f"p{i}", cpu="100m", labels={"app": "web"}, spread=[spread(wk.HOSTNAME, app="web")])
        for i in range(4)
    ]
    results = run(pods)
    assert len(results.new_claims) == 4


def test_hostname_spread_with_max_skew_two_allows_pairs() -> None:
    pods = [
        pod(f"p{i}", cpu="100m", labels={"app": "web"}, spread=[spread(wk.HOSTNAME, app="web", max_skew=2)])
        for i in range(4)
    ]
    assert len(run(pods).new_claims) == 2


def _two_zone_universe() -> tuple[list[InstanceType], Snapshot]:
    # New nodes only in zone-a; zone-b is in the spread's universe through an existing, full node.
    full = node("full", zone="zone-b", cpu=1, memory_gib=1)
    types = [instance_type("only-a", cpu=4, zones=["zone-a"])]
    return types, snapshot([(full, [pod("hog", cpu="1", node_name="full")])])


def test_schedule_anyway_spread_is_relaxed_when_it_cannot_be_met() -> None:
    types, snap = _two_zone_universe()
    pods = [
        pod(f"p{i}", cpu="100m", labels={"app": "w"}, spread=[spread(app="w", hard=False)]) for i in range(3)
    ]
    results = run(pods, types=types, snap=snap)
    assert not results.unschedulable
    assert sum(len(c.pods) for c in results.new_claims) == 3


def test_do_not_schedule_spread_leaves_pods_pending_when_skew_would_break() -> None:
    types, snap = _two_zone_universe()
    pods = [pod(f"p{i}", cpu="100m", labels={"app": "w"}, spread=[spread(app="w")]) for i in range(3)]
    results = run(pods, types=types, snap=snap)
    assert len(results.unschedulable) == 2
    assert "topology spread" in results.unschedulable[0].reasons[0].reason


def test_hostname_anti_affinity_gives_each_pod_a_node() -> None:
    pods = [pod(f"p{i}", cpu="100m", labels={"app": "db"}, anti_affinity=[term(app="db")]) for i in range(3)]
    results = run(pods)
    assert len(results.new_claims) == 3


def test_zone_anti_affinity_leaves_the_fourth_pod_pending_with_a_reason() -> None:
    pods = [
        pod(f"p{i}", cpu="100m", labels={"app": "db"}, anti_affinity=[term(wk.ZONE, app="db")])
        for i in range(4)
    ]
    results = run(pods)
    assert len(results.new_claims) == 3
    assert len({c.offering.zone for c in results.new_claims}) == 3
    (u,) = results.unschedulable
    assert "anti-affinity" in u.reasons[0].reason


def test_anti_affinity_of_an_existing_pod_keeps_new_pods_away() -> None:
    guard = pod("guard", labels={"app": "guard"}, anti_affinity=[term(app="web")], node_name="n1")
    n1 = node("n1", cpu=8, memory_gib=32)
    results = run([pod("w", cpu="100m", labels={"app": "web"})], snap=snapshot([(n1, [guard])]))
    assert not results.placements
    assert len(results.new_claims) == 1


def test_pods_differing_only_in_a_label_a_running_pod_selects_are_placed_apart() -> None:
    """Pods that differ only in labels no selector reads share one compiled shape; a running pod's
    anti-affinity selector counts among the read ones."""
    guard = pod("guard", labels={"app": "guard"}, anti_affinity=[term(app="web")], node_name="n1")
    n1 = node("n1", cpu=8, memory_gib=32)
    pending = [pod(name, cpu="100m", labels={"app": name, "rev": name}) for name in ("web", "api")]
    results = run(pending, snap=snapshot([(n1, [guard])]))
    assert [p.node for p in results.placements] == ["n1"]
    assert [p.pod.name for p in results.placements] == ["api"]
    assert [p.name for c in results.new_claims for p in c.pods] == ["web"]


def test_a_label_key_selected_by_exists_sets_pods_apart() -> None:
    exclusive = {"key": "exclusive", "operator": "Exists"}
    owner = pod(
        "owner",
        cpu="100m",
        anti_affinity=[{"topologyKey": wk.HOSTNAME, "labelSelector": {"matchExpressions": [exclusive]}}],
    )
    plain = pod("plain", cpu="100m", labels={"team": "a"})
    marked = pod("marked", cpu="100m", labels={"team": "a", "exclusive": "yes"})
    results = run([owner, plain, marked])
    owner_claim, marked_claim = claim_of(results, "owner"), claim_of(results, "marked")
    assert owner_claim is not None and marked_claim is not None
    assert owner_claim is not marked_claim
    assert claim_of(results, "plain") is not None


def test_preferred_anti_affinity_is_relaxed_when_it_cannot_be_met() -> None:
    pods = [
        pod(f"p{i}", cpu="100m", labels={"app": "c"}, preferred_anti_affinity=[(10, term(wk.ZONE, app="c"))])
        for i in range(5)
    ]
    results = run(pods)
    assert not results.unschedulable


def test_zone_affinity_follows_an_existing_pod() -> None:
    n1 = node("n1", zone="zone-b", cpu=1, memory_gib=2)
    cache = pod("cache", cpu="500m", labels={"app": "cache"}, node_name="n1")
    web = pod("web", cpu="2", labels={"app": "web"}, affinity=[term(wk.ZONE, app="cache")])
    results = run([web], snap=snapshot([(n1, [cache])]))
    assert results.new_claims[0].offering.zone == "zone-b"


def test_self_affinity_keeps_a_group_in_one_zone() -> None:
    pods = [pod(f"p{i}", cpu="3", labels={"app": "g"}, affinity=[term(wk.ZONE, app="g")]) for i in range(4)]
    results = run(pods)
    assert len({c.offering.zone for c in results.new_claims}) == 1


def test_affinity_to_a_pod_that_does_not_exist_is_unschedulable() -> None:
    results = run([pod("p", affinity=[term(wk.ZONE, app="ghost")])])
    assert "pod affinity" in reasons_of(results, "p")["default"]


def test_preferred_affinity_is_relaxed_when_nothing_matches() -> None:
    results = run([pod("p", preferred_affinity=[(10, term(wk.ZONE, app="ghost"))])])
    assert not results.unschedulable


def test_hostname_affinity_joins_the_pod_it_follows() -> None:
    pods = [
        pod("leader", cpu="1", labels={"app": "l"}),
        pod("follower", cpu="500m", affinity=[term(app="l")]),
    ]
    results = run(pods)
    assert len(results.new_claims) == 1


# ------------------------------------------------------------------------------------ capacity order


def test_existing_node_with_room_is_used_first() -> None:
    n1 = node("n1", cpu=4, memory_gib=16)
    results = run([pod("p", cpu="1")], snap=snapshot([(n1, [pod("old", cpu="1", node_name="n1")])]))
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "n1")]
    assert not results.new_claims


def test_full_existing_node_is_skipped() -> None:
    n1 = node("n1", cpu=2, memory_gib=16)
    results = run([pod("p", cpu="1500m")], snap=snapshot([(n1, [pod("old", cpu="1", node_name="n1")])]))
    assert not results.placements
    assert len(results.new_claims) == 1


@pytest.mark.parametrize("state", ["cordoned", "deleting"])
def test_cordoned_and_deleting_nodes_are_not_used(state: str) -> None:
    n1 = node("n1", cordoned=state == "cordoned")
    if state == "deleting":
        raw = dict(n1.raw)
        raw["metadata"] = {**raw["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}
        n1 = type(n1).from_dict(raw)
    results = run([pod("p", cpu="500m")], snap=snapshot([(n1, [])]))
    assert not results.placements


def _in_flight(name: str, pool: str = "default", instance: str = "m.2xlarge") -> StateNode:
    claim = NodeClaim.model_validate(
        {
            "metadata": {"name": name, "labels": {wk.NODEPOOL: pool}},
            "spec": {
                "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
                "requirements": [
                    {"key": wk.INSTANCE_TYPE, "operator": "In", "values": [instance]},
                    {"key": wk.ZONE, "operator": "In", "values": ["zone-c"]},
                ],
            },
        }
    )
    return StateNode(name=name, claim=claim)


def test_in_flight_claim_is_used_before_a_new_one() -> None:
    results = run([pod("p", cpu="1")], snap=Snapshot(nodes=(_in_flight("claim-1"),)))
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "claim-1")]


def test_existing_node_comes_before_in_flight_claim() -> None:
    n1 = node("zz-node", cpu=4)
    results = run(
        [pod("p", cpu="1")], snap=Snapshot(nodes=(_in_flight("aa-claim"), StateNode("zz-node", node=n1)))
    )
    assert results.placements[0].node == "zz-node"


def test_in_flight_claim_keeps_room_for_daemonsets() -> None:
    ds = daemonset(cpu="1")
    # m.2xlarge has 7.9 cpu allocatable; with the 1-cpu daemonset only 6.9 are left.
    results = run([pod("p", cpu="7")], snap=Snapshot(nodes=(_in_flight("c1"),)), daemonsets=[ds])
    assert not results.placements


# ------------------------------------------------------------------------------------------ pool order


def test_heavier_pool_is_tried_first() -> None:
    pools = [node_pool("light", weight=1), node_pool("heavy", weight=90), node_pool("none")]
    assert run([pod("p")], pools).new_claims[0].nodepool.name == "heavy"


def test_pools_of_equal_weight_go_by_name() -> None:
    pools = [node_pool("b"), node_pool("a")]
    assert run([pod("p")], pools).new_claims[0].nodepool.name == "a"


def test_pool_annotation_restricts_and_orders_pools() -> None:
    pools = [node_pool("heavy", weight=90), node_pool("b"), node_pool("c")]
    results = run([pod("p", pools=["c", "b"])], pools)
    assert results.new_claims[0].nodepool.name == "c"


def test_pool_annotation_falls_through_the_list_in_order() -> None:
    pools = [node_pool("first", limits={"cpu": "0"}), node_pool("second"), node_pool("heavy", weight=90)]
    results = run([pod("p", pools=["first", "second"])], pools)
    assert results.new_claims[0].nodepool.name == "second"


def test_pool_annotation_naming_an_unknown_pool_says_so() -> None:
    results = run([pod("p", pools=["ghost"])], [node_pool("real")])
    assert reasons_of(results, "p") == {"ghost": "NodePool ghost does not exist"}


def test_reasons_follow_the_pool_list_order() -> None:
    pools = [node_pool("a", limits={"cpu": "0"}), node_pool("b", limits={"cpu": "0"})]
    results = run([pod("p", pools=["b", "ghost", "a"])], pools)
    assert [r.nodepool for r in results.unschedulable[0].reasons] == ["b", "ghost", "a"]


def test_pool_annotation_keeps_pods_off_existing_nodes_of_other_pools() -> None:
    n1 = node("n1", pool="other", cpu=8)
    results = run([pod("p", pools=["default"])], snap=snapshot([(n1, [])]))
    assert not results.placements


# --------------------------------------------------------------------------------------------- limits


def test_cpu_limit_is_never_exceeded_and_the_reason_has_numbers() -> None:
    pool = node_pool(limits={"cpu": "8"})
    pods = [pod(f"p{i}", cpu="3", anti_affinity=[term(app="x")], labels={"app": "x"}) for i in range(4)]
    results = run(pods, pool)
    assert sum(c.instance_type.capacity["cpu"] for c in results.new_claims) <= 8000
    assert len(results.unschedulable) == 2
    reason = results.unschedulable[0].reasons[0].reason
    assert "limit cpu=8 would be exceeded: 8 in use" in reason and "adds 4" in reason


def test_limits_count_existing_nodes() -> None:
    pool = node_pool(limits={"cpu": "6"})
    n1 = node("n1", cpu=4, memory_gib=16)
    results = run([pod("p", cpu="3")], pool, snap=snapshot([(n1, [pod("old", cpu="3", node_name="n1")])]))
    assert results.unschedulable
    assert "4 in use" in results.unschedulable[0].reasons[0].reason


def test_gpu_limit_sends_the_rest_to_the_next_pool() -> None:
    pools = [gpu_pool("small", weight=50, limits={wk.GPU_RESOURCE: "8"}), gpu_pool("big")]
    pods = [gpu_pod(f"t{i}", gpus=8, gpu_name="a100") for i in range(2)]
    results = run(pods, pools, types={"small": gpu_types(), "big": gpu_types()})
    assert sorted(c.nodepool.name for c in results.new_claims) == ["big", "small"]


def test_node_count_limit() -> None:
    pool = node_pool(limits={"nodes": "2"})
    pods = [pod(f"p{i}", cpu="100m", labels={"app": "x"}, anti_affinity=[term(app="x")]) for i in range(3)]
    results = run(pods, pool)
    assert len(results.new_claims) == 2
    assert "limit nodes=2" in results.unschedulable[0].reasons[0].reason


# ------------------------------------------------------------------------------------------ GPU shape


def test_gpu_pod_lands_where_its_gpus_fit() -> None:
    results = run([gpu_pod("p", gpus=4, gpu_name="l4")], gpu_pool(), types=gpu_types())
    assert results.new_claims[0].instance_type.name == "g.l4x4"


def test_gpu_count_requirement() -> None:
    p = gpu_pod("p", gpus=1, gpu_name=None, required=[[req(wk.GPU_COUNT, "Gt", "4")]])
    assert present(run([p], gpu_pool(), types=gpu_types()).new_claims[0].instance_type.gpu).count == 8


def test_gpu_memory_requirement() -> None:
    p = gpu_pod("p", gpus=1, gpu_name=None, required=[[req(wk.GPU_MEMORY, "Gt", "40960")]])
    assert present(run([p], gpu_pool(), types=gpu_types()).new_claims[0].instance_type.gpu).name == "h100"


def test_gpu_name_not_in() -> None:
    p = gpu_pod("p", gpus=1, gpu_name=None, required=[[req(wk.GPU_NAME, "NotIn", "l4")]])
    assert present(run([p], gpu_pool(), types=gpu_types()).new_claims[0].instance_type.gpu).name == "a100"


def test_gpu_memory_lt() -> None:
    p = gpu_pod("p", gpus=1, gpu_name=None, required=[[req(wk.GPU_MEMORY, "Lt", "30000")]])
    assert present(run([p], gpu_pool(), types=gpu_types()).new_claims[0].instance_type.gpu).name == "l4"


def test_pool_gpu_requirement_limits_the_types() -> None:
    pool = gpu_pool(requirements=[req(wk.GPU_NAME, "In", "a100")])
    results = run([gpu_pod("p", gpus=1, gpu_name=None)], pool, types=gpu_types())
    assert {present(t.gpu).name for t in results.new_claims[0].instance_types} == {"a100"}


def test_too_many_gpus_names_the_largest_type() -> None:
    results = run([gpu_pod("p", gpus=16, gpu_name="h100")], gpu_pool(), types=gpu_types())
    reason = reasons_of(results, "p")["gpu"]
    assert "no instance type is big enough" in reason and "nvidia.com/gpu 16" in reason
    assert "the largest is p.h100x8 with nvidia.com/gpu 8" in reason


def test_gpu_name_no_pool_offers_is_named() -> None:
    results = run([gpu_pod("p", gpus=1, gpu_name="b200")], gpu_pool(), types=gpu_types())
    reason = reasons_of(results, "p")["gpu"]
    assert reason == "no instance type offers gpu-name In [b200]; the pool's catalog has a100, h100, l4"


def test_requirement_conflict_with_the_pool_is_named() -> None:
    pool = gpu_pool(requirements=[req(wk.GPU_NAME, "In", "a100")])
    results = run([gpu_pod("p", gpus=1, gpu_name="h100")], pool, types=gpu_types())
    assert reasons_of(results, "p")["gpu"] == (
        "requirement provisioner.sh/gpu-name In [h100] conflicts with the pool's provisioner.sh/gpu-name In [a100]"
    )


# --------------------------------------------------------------------------- capacity type and zone


def test_spot_is_chosen_when_cheaper() -> None:
    results = run([pod("p")])
    assert results.new_claims[0].offering.capacity_type == "spot"


def test_spot_falls_back_to_on_demand_when_spot_is_exhausted() -> None:
    stockout = [(z, "spot") for z in ZONES]
    types = [instance_type("m.xlarge", cpu=4, spot_price=0.03, unavailable=stockout)]
    claim = run([pod("p")], types=types).new_claims[0]
    assert claim.offering.capacity_type == "on-demand"
    assert claim.offering.available


def test_zone_falls_back_to_the_next_zone_when_the_first_is_exhausted() -> None:
    stockout = [("zone-a", "spot"), ("zone-a", "on-demand")]
    types = [instance_type("m.xlarge", cpu=4, spot_price=0.03, unavailable=stockout)]
    claim = run([pod("p")], types=types).new_claims[0]
    assert claim.offering.zone == "zone-b" and claim.offering.capacity_type == "spot"


def test_type_falls_back_to_the_next_type_when_every_offering_of_the_cheapest_is_exhausted() -> None:
    stockout = [(z, ct) for z in ZONES for ct in ("spot", "on-demand")]
    types = [
        instance_type("cheap", cpu=4, price=0.1, spot_price=0.05, unavailable=stockout),
        instance_type("dear", cpu=8, price=0.2),
    ]
    claim = run([pod("p")], types=types).new_claims[0]
    assert claim.instance_type.name == "dear"
    assert [t.name for t in claim.instance_types] == ["dear"]


def test_zone_required_by_the_pod_with_spot_gone_there_falls_to_on_demand_in_that_zone() -> None:
    types = [instance_type("m.xlarge", cpu=4, spot_price=0.03, unavailable=[("zone-c", "spot")])]
    claim = run([pod("p", node_selector={wk.ZONE: "zone-c"})], types=types).new_claims[0]
    assert (claim.offering.zone, claim.offering.capacity_type) == ("zone-c", "on-demand")


def test_on_demand_only_pool_never_takes_spot() -> None:
    pool = node_pool(requirements=[req(wk.CAPACITY_TYPE, "In", "on-demand")])
    assert run([pod("p")], pool).new_claims[0].offering.capacity_type == "on-demand"


def test_every_offering_unavailable_is_the_reason() -> None:
    stockout = [(z, ct) for z in ZONES for ct in ("spot", "on-demand")]
    types = [instance_type("only", cpu=4, spot_price=0.03, unavailable=stockout)]
    reason = reasons_of(run([pod("p")], types=types), "p")["default"]
    assert reason.startswith("every offering of the 1 instance types that fit is unavailable")
    assert "only spot zone-a" in reason


def test_offering_tie_is_broken_by_zone_name() -> None:
    claim = run([pod("p")]).new_claims[0]
    assert claim.offering.zone == "zone-a"


# ------------------------------------------------------------------------------------------ new claims


def test_new_claim_options_are_cheapest_first_and_capped() -> None:
    types = [instance_type(f"t{i:03d}", cpu=4 + i, price=1 + i / 100) for i in range(80)]
    claim = run([pod("p")], types=types).new_claims[0]
    assert len(claim.instance_types) == 60
    prices = [t.offerings[0].price for t in claim.instance_types]
    assert prices == sorted(prices)
    it_req = next(r for r in claim.requirements if r.key == wk.INSTANCE_TYPE)
    assert it_req.values == [t.name for t in claim.instance_types]
    assert claim.offering in claim.instance_types[0].offerings


def test_new_claim_options_all_fit_every_pod_of_the_claim() -> None:
    claim = run([pod("a", cpu="2"), pod("b", cpu="2")]).new_claims[0]
    assert all(t.allocatable["cpu"] >= 4000 for t in claim.instance_types)


def test_new_claim_converts_to_a_nodeclaim() -> None:
    claim = run([pod("p")], node_pool(taints=[{"key": "k", "effect": "NoSchedule"}])).new_claims
    assert not claim  # the pod does not tolerate the taint
    results = run(
        [pod("p", tolerations=[{"key": "k", "operator": "Exists"}])],
        node_pool(taints=[{"key": "k", "effect": "NoSchedule"}]),
    )
    nc = results.new_claims[0].to_nodeclaim("default-abc")
    assert nc.nodepool == "default"
    assert nc.instance_type_options() == [t.name for t in results.new_claims[0].instance_types]
    assert nc.spec.taints[0].key == "k"
    assert nc.spec.resources.requests["cpu"] == "1"


def test_pool_requirements_are_carried_into_the_claim() -> None:
    pool = node_pool(
        requirements=[req(wk.CAPACITY_TYPE, "In", "spot", "on-demand"), req(wk.ARCH, "In", "amd64")]
    )
    claim = run([pod("p")], pool).new_claims[0]
    keys = {r.key for r in claim.requirements}
    assert {wk.CAPACITY_TYPE, wk.ARCH, wk.INSTANCE_TYPE} <= keys


# --------------------------------------------------------------------------------- accounting & misc


def test_every_pod_is_accounted_for_exactly_once() -> None:
    n1 = node("n1", cpu=2)
    pods = [pod(f"p{i}", cpu=f"{(i % 4) + 1}") for i in range(20)] + [gpu_pod("g", gpus=1)]
    results = run(pods, snap=snapshot([(n1, [])]))
    assert accounted(results) == Counter(p.key for p in pods)


def test_solve_is_deterministic_whatever_the_input_order() -> None:
    pods = [
        pod(f"p{i}", cpu=f"{(i % 3) + 1}", labels={"app": f"a{i % 2}"}, spread=[spread(app=f"a{i % 2}")])
        for i in range(12)
    ]

    def shape(results: Results) -> list[tuple[str, str, Offering, list[str]]]:
        return [
            (c.hostname, c.instance_type.name, c.offering, sorted(p.name for p in c.pods))
            for c in results.new_claims
        ]

    first = shape(run(pods))
    shuffled = list(pods)
    random.Random(7).shuffle(shuffled)
    assert shape(run(shuffled)) == first
    assert shape(run(pods)) == first


def test_pods_already_bound_elsewhere_are_rescheduled_for_disruption() -> None:
    # The disruption planner removes a node from the snapshot and passes its pods.
    moved = pod("moved", cpu="1", node_name="gone-node")
    n1 = node("n1", cpu=4)
    results = run([moved], snap=snapshot([(n1, [])]))
    assert results.placements[0].node == "n1"


def test_no_pools_gives_a_reason() -> None:
    results = run([pod("p")], pools=[], types={})
    assert reasons_of(results, "p") == {"": "no NodePool exists"}


def test_pool_whose_nodeclass_offers_nothing() -> None:
    results = run([pod("p")], types={"default": []})
    assert reasons_of(results, "p") == {"default": "its NodeClass offers no instance types"}


def test_gpu_and_cpu_pods_go_to_their_own_pools() -> None:
    pools = [gpu_pool(weight=50), node_pool("cpu")]
    pods = [gpu_pod("g", gpus=8, gpu_name="a100"), pod("c", cpu="1")]
    results = run(pods, pools, types={"gpu": gpu_types(), "cpu": cpu_types()})
    assert present(claim_of(results, "g")).nodepool.name == "gpu"
    assert present(claim_of(results, "c")).nodepool.name == "cpu"


def test_offerings_builder_marks_unavailable() -> None:
    offs = offerings(od_price=1.0, spot_price=0.5, unavailable=[("zone-a", "spot")])
    assert [o.available for o in offs if o.zone == "zone-a"] == [False, True]


def test_cordoned_nodes_still_count_toward_limits() -> None:
    pool = node_pool(limits={"cpu": "8"})
    cordoned = node("old", cpu=8, memory_gib=32, cordoned=True)
    results = run([pod("p", cpu="1")], pool, snap=snapshot([(cordoned, [])]))
    assert not results.placements and not results.new_claims
    assert "8 in use" in reasons_of(results, "p")["default"]


def test_zone_is_pinned_where_the_type_that_fits_is_cheapest() -> None:
    types = [
        instance_type("small", cpu=2, price=0.1, spot_price=0.05),
        instance_type("big", cpu=8, price=0.4, spot_price=0.2, unavailable=[("zone-a", "spot")]),
    ]
    pods = [pod("p", cpu="4", labels={"app": "w"}, spread=[spread(app="w")])]
    claim = run(pods, types=types).new_claims[0]
    assert (claim.instance_type.name, claim.offering.capacity_type) == ("big", "spot")
    assert claim.offering.zone == "zone-b"


def test_a_pod_joins_a_dearer_open_node_when_no_pool_can_open_one() -> None:
    # The node-count limit forbids a second node, so sharing is better than staying pending.
    results = run([pod("big", cpu="3"), pod("small", cpu="1")], node_pool(limits={"nodes": "1"}))
    assert not results.unschedulable
    assert [c.instance_type.name for c in results.new_claims] == ["m.2xlarge"]


def _starting_gpu_node() -> StateNode:
    """A registered GPU node whose driver is not ready: start-up taint on, no GPUs reported yet."""
    n = node(
        "gpu-node",
        cpu=96,
        memory_gib=1152,
        pool="gpu",
        taints=[
            {"key": wk.GPU_RESOURCE, "value": "true", "effect": "NoSchedule"},
            {"key": "driver-not-ready", "effect": "NoSchedule"},
        ],
    )
    claim = NodeClaim.model_validate(
        {
            "metadata": {"name": "gpu-claim", "labels": {wk.NODEPOOL: "gpu"}},
            "spec": {
                "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
                "startupTaints": [{"key": "driver-not-ready", "effect": "NoSchedule"}],
            },
            "status": {"allocatable": {"cpu": "95", "memory": "1100Gi", "pods": "110", wk.GPU_RESOURCE: "8"}},
        }
    )
    return StateNode(name="gpu-node", node=n, claim=claim)


def test_node_still_starting_is_usable_despite_start_up_taints_and_unreported_gpus() -> None:
    results = run(
        [gpu_pod("g", gpus=8, gpu_name=None)],
        gpu_pool(),
        types=gpu_types(),
        snap=Snapshot(nodes=(_starting_gpu_node(),)),
    )
    assert [(p.pod.name, p.node) for p in results.placements] == [("g", "gpu-node")]


def _family_types() -> list[InstanceType]:
    return [
        instance_type("m.large", cpu=2, price=0.10),
        instance_type("m.xlarge", cpu=4, price=0.20),
        instance_type("c.large", cpu=2, price=0.12),
        instance_type("r.xlarge", cpu=4, price=0.30),
    ]


def test_min_values_keeps_enough_distinct_values_among_the_options() -> None:
    family = {"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["m", "c", "r"], "minValues": 3}
    results = run(
        [pod("p", cpu="1")],
        node_pool(requirements=[family]),
        _family_types(),
        options=SolveOptions(max_options=3),
    )
    claim = results.new_claims[0]
    assert [t.name for t in claim.instance_types] == ["m.large", "c.large", "r.xlarge"]
    assert claim.offering.price == 0.10


def test_min_values_that_cannot_be_met_is_the_reason() -> None:
    family = {"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["m", "c", "r"], "minValues": 3}
    results = run([pod("p", cpu="3")], node_pool(requirements=[family]), _family_types())
    assert (
        reasons_of(results, "p")["default"]
        == "minValues 3 for provisioner.sh/instance-family: only 2 values fit (m, r)"
    )
