"""Scheduling as Karpenter's own suites define it (issue 11), translated to our builders: same-batch pod
(anti-)affinity, custom label keys a pool defines, PreferNoSchedule pools, host ports, topology spread
policies, and the most constrained pods first."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.api.nodepool import NodePool
from provisioner.scheduling import Results, explain
from provisioner.state.objects import Pod
from provisioner.state.snapshot import Snapshot
from testkit.builders import (
    claim_of,
    cpu_types,
    gpu_pod,
    gpu_types,
    node,
    node_pool,
    pod,
    req,
    run,
    snapshot,
    spread,
    term,
)
from testkit.typed import present

KEY = "example.com/tier"


def zone_of(results: Results, name: str) -> str:
    claim = claim_of(results, name)
    assert claim is not None, f"{name} got no new node"
    return claim.offering.zone


def host_of(results: Results, name: str) -> str:
    claim = claim_of(results, name)
    if claim is not None:
        return claim.hostname
    placed = next(p for p in results.placements if p.pod.name == name)
    return placed.node


def with_spec(base: Pod, **spec: Any) -> Pod:
    raw = dict(base.raw)
    return Pod.from_dict({**raw, "spec": {**raw["spec"], **spec}})


def with_ports(base: Pod, *ports: dict[str, Any]) -> Pod:
    raw = dict(base.raw)
    (container,) = raw["spec"]["containers"]
    return with_spec(base, containers=[{**container, "ports": list(ports)}])


def skew(results: Results, key: str = wk.ZONE) -> list[int]:
    counts: Counter[str] = Counter()
    for claim in results.new_claims:
        value = claim.offering.zone if key == wk.ZONE else claim.hostname
        counts[value] += len(claim.pods)
    return sorted(counts.values())


# Same-batch pod affinity and anti-affinity ---------------------------------------------------------------


def test_a_hostname_affinity_chain_lands_on_one_node_whatever_the_order() -> None:
    # ui -> cache -> web -> db; the followers are larger, so a largest-first order meets them first.
    db = pod("db", cpu="100m", labels={"type": "db"})
    web = pod(
        "web",
        cpu="1",
        labels={"type": "web"},
        affinity=[{"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"type": "db"}}}],
    )
    cache = pod(
        "cache",
        cpu="1500m",
        labels={"type": "cache"},
        affinity=[{"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"type": "web"}}}],
    )
    ui = pod(
        "ui",
        cpu="2",
        labels={"type": "ui"},
        affinity=[{"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"type": "cache"}}}],
    )
    results = run([ui, cache, web, db], types=cpu_types())
    assert not results.unschedulable, [u.reasons for u in results.unschedulable]
    assert len({host_of(results, n) for n in ("db", "web", "cache", "ui")}) == 1


def test_a_zone_affine_group_follows_its_target_constrained_to_one_zone() -> None:
    target = pod("target", cpu="100m", labels={"security": "s2"}, required=[[req(wk.ZONE, "In", "zone-c")]])
    followers = [
        pod(
            f"f{i}",
            cpu="1",
            affinity=[{"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": {"security": "s2"}}}],
        )
        for i in range(10)
    ]
    results = run([*followers, target])
    assert not results.unschedulable, [(u.pod.name, u.reasons) for u in results.unschedulable]
    assert {zone_of(results, p.name) for p in [target, *followers]} == {"zone-c"}


def test_a_zone_affine_pod_follows_a_pending_target_into_the_zone_it_gets() -> None:
    target = pod("target", cpu="3", labels={"app": "t"})
    follower = pod("follower", cpu="3", affinity=[term(wk.ZONE, app="t")])
    results = run([follower, target])
    assert not results.unschedulable
    assert zone_of(results, "follower") == zone_of(results, "target")


def test_zone_anti_affinity_between_two_groups_of_the_batch_keeps_them_apart() -> None:
    a = [
        pod(f"a{i}", cpu="100m", labels={"app": "a"}, anti_affinity=[term(wk.ZONE, app="b")])
        for i in range(2)
    ]
    b = [pod(f"b{i}", cpu="100m", labels={"app": "b"}) for i in range(2)]
    results = run([*a, *b])
    assert not results.unschedulable
    assert not {zone_of(results, p.name) for p in a} & {zone_of(results, p.name) for p in b}


def test_anti_affinity_of_a_pending_pod_keeps_the_pods_it_selects_out_of_its_zone_whatever_the_order() -> (
    None
):
    # Karpenter's "inverse" case: the pod carrying the anti-affinity is placed last (it is the smallest).
    guard = pod(
        "guard",
        cpu="100m",
        labels={"app": "guard"},
        anti_affinity=[term(wk.ZONE, app="web")],
        required=[[req(wk.ZONE, "In", "zone-a")]],
    )
    webs = [pod(f"w{i}", cpu="2", labels={"app": "web"}) for i in range(3)]
    results = run([guard, *webs])
    assert not results.unschedulable
    assert zone_of(results, "guard") == "zone-a"
    assert "zone-a" not in {zone_of(results, w.name) for w in webs}


# Custom label keys a pool defines ----------------------------------------------------------------------


def tier_pool(*values: str) -> NodePool:
    return node_pool(requirements=[req(KEY, "In", *values)])


def claim_labels(results: Results, name: str) -> dict[str, str]:
    claim = claim_of(results, name)
    assert claim is not None
    return claim.to_nodeclaim("c").metadata.labels


@pytest.mark.parametrize(
    ("requirement", "schedules"),
    [
        pytest.param(req(KEY, "In", "gold"), True, id="In-matching"),
        pytest.param(req(KEY, "In", "silver"), False, id="In-other"),
        pytest.param(req(KEY, "NotIn", "gold"), False, id="NotIn-matching"),
        pytest.param(req(KEY, "NotIn", "silver"), True, id="NotIn-other"),
        pytest.param(req(KEY, "Exists"), True, id="Exists"),
        pytest.param(req(KEY, "DoesNotExist"), False, id="DoesNotExist"),
    ],
)
def test_required_affinity_on_a_key_the_pool_defines(
    requirement: dict[str, str | list[str]], schedules: bool
) -> None:
    results = run([pod("p", required=[[requirement]])], tier_pool("gold"))
    assert (claim_of(results, "p") is not None) is schedules


@pytest.mark.parametrize(
    "requirement",
    [req(KEY, "In", "gold"), req(KEY, "Exists"), req(KEY, "NotIn", "silver")],
    ids=["In", "Exists", "NotIn"],
)
def test_the_node_carries_the_label_of_a_key_the_pool_defines(
    requirement: dict[str, str | list[str]],
) -> None:
    results = run([pod("p", required=[[requirement]])], tier_pool("gold"))
    assert claim_labels(results, "p")[KEY] == "gold"


def test_an_unconstrained_pod_gets_the_pools_single_value_as_a_label() -> None:
    results = run([pod("p")], tier_pool("gold"))
    assert claim_labels(results, "p")[KEY] == "gold"


def test_pods_asking_for_different_values_of_a_pool_key_get_different_nodes_with_their_labels() -> None:
    pods = [
        pod("g", cpu="100m", node_selector={KEY: "gold"}),
        pod("s", cpu="100m", node_selector={KEY: "silver"}),
    ]
    results = run(pods, tier_pool("gold", "silver"))
    assert claim_labels(results, "g")[KEY] == "gold"
    assert claim_labels(results, "s")[KEY] == "silver"
    assert claim_of(results, "g") is not claim_of(results, "s")


def test_compatible_pods_share_a_node_on_a_pool_key() -> None:
    pods = [
        pod("g", cpu="100m", required=[[req(KEY, "In", "gold")]]),
        pod("n", cpu="100m", required=[[req(KEY, "NotIn", "silver")]]),
    ]
    results = run(pods, tier_pool("gold", "silver"))
    assert claim_of(results, "g") is claim_of(results, "n")


@pytest.mark.parametrize(
    ("requirement", "schedules"),
    [
        pytest.param(req(KEY, "In", "gold"), False, id="In"),
        pytest.param(req(KEY, "NotIn", "gold"), True, id="NotIn"),
        pytest.param(req(KEY, "Exists"), False, id="Exists"),
        pytest.param(req(KEY, "DoesNotExist"), True, id="DoesNotExist"),
    ],
)
def test_a_key_no_pool_defines_behaves_as_karpenter(
    requirement: dict[str, str | list[str]], schedules: bool
) -> None:
    results = run([pod("p", required=[[requirement]])])
    assert (claim_of(results, "p") is not None) is schedules


# PreferNoSchedule ----------------------------------------------------------------------------------------

SOFT = {"key": "dedicated", "value": "batch", "effect": "PreferNoSchedule"}


def test_a_pool_with_a_prefer_no_schedule_taint_is_avoided_while_another_fits() -> None:
    pools = [node_pool("soft", weight=100, taints=[SOFT]), node_pool("plain", weight=1)]
    results = run([pod("p")], pools)
    assert present(claim_of(results, "p")).nodepool.name == "plain"


def test_a_prefer_no_schedule_pool_is_used_when_nothing_else_fits() -> None:
    pools = [node_pool("soft", taints=[SOFT]), node_pool("plain", limits={"cpu": "0"})]
    results = run([pod("p")], pools)
    assert present(claim_of(results, "p")).nodepool.name == "soft"


def test_a_pod_tolerating_the_prefer_no_schedule_taint_may_use_its_pool() -> None:
    pools = [node_pool("soft", weight=100, taints=[SOFT]), node_pool("plain", weight=1)]
    tolerant = pod("p", tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert present(claim_of(run([tolerant], pools), "p")).nodepool.name == "soft"


def test_an_existing_node_with_a_prefer_no_schedule_taint_is_avoided_while_another_fits() -> None:
    soft = node("a-soft", taints=[SOFT])
    plain = node("b-plain")
    results = run([pod("p", cpu="100m")], snap=snapshot([(soft, []), (plain, [])]))
    assert [p.node for p in results.placements] == ["b-plain"]


# Host ports ----------------------------------------------------------------------------------------------


def test_two_pods_with_the_same_host_port_never_share_a_node() -> None:
    pods = [with_ports(pod(f"p{i}", cpu="100m"), {"containerPort": 80, "hostPort": 8080}) for i in range(2)]
    results = run(pods)
    assert host_of(results, "p0") != host_of(results, "p1")


def test_different_host_ports_or_protocols_may_share_a_node() -> None:
    a = with_ports(pod("a", cpu="100m"), {"containerPort": 80, "hostPort": 8080})
    b = with_ports(pod("b", cpu="100m"), {"containerPort": 80, "hostPort": 8081})
    c = with_ports(pod("c", cpu="100m"), {"containerPort": 80, "hostPort": 8080, "protocol": "UDP"})
    results = run([a, b, c])
    assert len({host_of(results, n) for n in "abc"}) == 1


def test_a_host_port_taken_on_an_existing_node_sends_the_pod_elsewhere() -> None:
    n1 = node("n1", cpu=8, memory_gib=32)
    running = with_spec(
        with_ports(pod("running", cpu="100m"), {"containerPort": 80, "hostPort": 8080}), nodeName="n1"
    )
    new = with_ports(pod("new", cpu="100m"), {"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"})
    results = run([new], snap=snapshot([(n1, [running])]))
    assert not results.placements and claim_of(results, "new") is not None


# Topology spread ---------------------------------------------------------------------------------------


def spread_with(**extra: Any) -> dict[str, Any]:
    return {**spread(app="w"), **extra}


def test_min_domains_counts_missing_domains_as_empty() -> None:
    pools = node_pool(requirements=[req(wk.ZONE, "In", "zone-a", "zone-b")])
    pods = [
        pod(f"p{i}", cpu="100m", labels={"app": "w"}, spread=[spread_with(minDomains=3)]) for i in range(3)
    ]
    results = run(pods, pools)
    assert skew(results) == [1, 1]
    assert len(results.unschedulable) == 1


def test_min_domains_met_spreads_as_usual() -> None:
    pods = [
        pod(f"p{i}", cpu="100m", labels={"app": "w"}, spread=[spread_with(minDomains=2)]) for i in range(11)
    ]
    results = run(pods)
    assert skew(results) == [3, 4, 4]


def tainted_nodes_with_spread_label() -> Snapshot:
    taint = {"key": "taintname", "value": "v", "effect": "NoSchedule"}
    nodes = [
        node(f"n{i}", cpu=1, labels={"fake-label": v}, taints=[taint]) for i, v in enumerate(("foo", "bar"))
    ]
    return snapshot([(n, []) for n in nodes])


@pytest.mark.parametrize(("policy", "expected"), [("Ignore", [1]), ("Honor", [5])])
def test_node_taints_policy_decides_whether_tainted_nodes_count_as_domains(
    policy: str, expected: list[int]
) -> None:
    pool = node_pool(labels={"fake-label": "baz"})
    constraint = {**spread("fake-label", app="w"), "nodeTaintsPolicy": policy}
    pods = [pod(f"p{i}", cpu="1", labels={"app": "w"}, spread=[constraint]) for i in range(5)]
    results = run(pods, pool, snap=tainted_nodes_with_spread_label())
    placed = sum(len(c.pods) for c in results.new_claims)
    assert [placed] == expected


@pytest.mark.parametrize(("policy", "expected"), [("Ignore", 1), ("Honor", 5)])
def test_node_affinity_policy_decides_whether_unselectable_nodes_count_as_domains(
    policy: str, expected: int
) -> None:
    pool = node_pool(labels={"fake-label": "baz", "selector": "value"})
    others = [
        node(f"n{i}", cpu=1, labels={"fake-label": v, "selector": "mismatch"})
        for i, v in enumerate(("foo", "bar"))
    ]
    constraint = {**spread("fake-label", app="w"), "nodeAffinityPolicy": policy}
    pods = [
        pod(f"p{i}", cpu="1", labels={"app": "w"}, node_selector={"selector": "value"}, spread=[constraint])
        for i in range(5)
    ]
    results = run(pods, pool, snap=snapshot([(n, []) for n in others]))
    assert sum(len(c.pods) for c in results.new_claims) == expected


def test_a_spread_is_not_narrowed_by_a_preferred_node_affinity() -> None:
    pods = [
        pod(
            f"p{i}",
            cpu="100m",
            labels={"app": "w"},
            spread=[spread(app="w")],
            preferred=[(10, [req(wk.ZONE, "In", "zone-a", "zone-b")])],
        )
        for i in range(6)
    ]
    results = run(pods)
    assert skew(results) == [2, 2, 2]


def test_a_spread_is_narrowed_by_a_required_node_affinity() -> None:
    pods = [
        pod(
            f"p{i}",
            cpu="100m",
            labels={"app": "w"},
            spread=[spread(app="w")],
            required=[[req(wk.ZONE, "In", "zone-a", "zone-b")]],
        )
        for i in range(6)
    ]
    assert skew(run(pods)) == [3, 3]


# Most constrained first ----------------------------------------------------------------------------------

TAINT = {"key": wk.GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}


def h100_and_a100_pools() -> list[NodePool]:
    return [
        node_pool(
            "h100",
            weight=100,
            taints=[TAINT],
            limits={wk.GPU_RESOURCE: "8"},
            requirements=[req(wk.GPU_NAME, "In", "h100")],
        ),
        node_pool("a100", weight=10, taints=[TAINT], requirements=[req(wk.GPU_NAME, "In", "a100")]),
    ]


def flexible(name: str) -> Pod:
    return gpu_pod(name, gpus=8, gpu_name=None, cpu="8", required=[[req(wk.GPU_NAME, "In", "h100", "a100")]])


def test_a_pod_pinned_to_h100_is_placed_before_flexible_pods_take_the_h100_limit() -> None:
    strict = gpu_pod("strict", gpus=8, gpu_name="h100", cpu="4")
    results = run([flexible("flex-a"), flexible("flex-b"), strict], h100_and_a100_pools(), gpu_types())
    assert not results.unschedulable, [(u.pod.name, u.reasons) for u in results.unschedulable]
    assert present(claim_of(results, "strict")).nodepool.name == "h100"
    assert {present(claim_of(results, n)).nodepool.name for n in ("flex-a", "flex-b")} == {"a100"}


def test_explain_gives_the_reason_a_pod_ends_unschedulable_in_the_full_solve() -> None:
    pools = h100_and_a100_pools()
    strict = [gpu_pod(f"strict-{i}", gpus=8, gpu_name="h100", cpu="4") for i in range(2)]
    types = {p.name: gpu_types() for p in pools}
    alone = {v.nodepool: v for v in explain(strict[1], snapshot(), pools=pools, instance_types=types)}
    assert alone["h100"].fits, "on its own the pod fits the H100 pool"
    verdicts = {
        v.nodepool: v for v in explain(strict[1], snapshot(), pools=pools, instance_types=types, pods=strict)
    }
    assert not verdicts["h100"].fits
    assert "limit" in verdicts["h100"].reason and "default/strict-0" in verdicts["h100"].reason
