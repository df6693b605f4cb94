"""A pod's pool order (`scheduling.pool_order`) and what the solver does with it: the pod's own list, its
team's, the cluster's default CPU or GPU pools, the pool named `default`, every pool by weight; and a pod
its default list can never serve, refused at once with the reason."""

from __future__ import annotations

import pytest

from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.scheduling import explain
from provisioner.scheduling.pool_order import ClusterDefaults, PoolOrder, refusal, resolve
from provisioner.scheduling.solver import SolveOptions
from provisioner.state.cluster import Snapshot
from provisioner.state.objects import Pod
from testkit.builders import (
    cpu_types,
    gpu_pod,
    gpu_types,
    instance_type,
    node,
    node_pool,
    pod,
    req,
    run,
    snapshot,
)

POOLS = ("cpu-a", "cpu-b", "gpu-a", "gpu-b", "default")
DEFAULTS = ClusterDefaults(cpu=("cpu-b", "cpu-a"), gpu=("gpu-b",))


@pytest.mark.parametrize(
    ("the_pod", "team", "defaults", "names", "expected"),
    [
        (
            pod(pools=["gpu-a", "cpu-a"]),
            ("cpu-b",),
            DEFAULTS,
            POOLS,
            PoolOrder(("gpu-a", "cpu-a"), "annotation"),
        ),
        (pod(), ("cpu-b",), DEFAULTS, POOLS, PoolOrder(("cpu-b",), "team")),
        (pod(), (), DEFAULTS, POOLS, PoolOrder(("cpu-b", "cpu-a"), "cluster-cpu")),
        (gpu_pod(gpus=1), (), DEFAULTS, POOLS, PoolOrder(("gpu-b",), "cluster-gpu")),
        (
            gpu_pod(gpus=1),
            (),
            ClusterDefaults(cpu=("cpu-a",)),
            POOLS,
            PoolOrder(("default",), "default-pool"),
        ),
        (pod(), (), ClusterDefaults(), POOLS, PoolOrder(("default",), "default-pool")),
        (pod(), (), ClusterDefaults(), POOLS[:-1], PoolOrder(None, "weight")),
    ],
    ids=[
        "annotation-first",
        "team-before-cluster",
        "cpu-pod-cluster-cpu-list",
        "gpu-pod-cluster-gpu-list",
        "gpu-list-unset-pool-named-default",
        "nothing-set-pool-named-default",
        "nothing-at-all-every-pool-by-weight",
    ],
)
def test_a_pods_pool_order_comes_from_the_first_rule_that_applies(
    the_pod: Pod,
    team: tuple[str, ...],
    defaults: ClusterDefaults,
    names: tuple[str, ...],
    expected: PoolOrder,
) -> None:
    assert resolve(the_pod, team_default=team, defaults=defaults, pool_names=names) == expected


def test_lists_given_as_text_keep_their_order_and_drop_blanks_and_repeats() -> None:
    assert ClusterDefaults.of(cpu="b, a,,b", gpu=["g1,g2", "g1"]) == ClusterDefaults(
        cpu=("b", "a"), gpu=("g1", "g2")
    )


def test_a_gpu_pod_whose_default_list_launches_no_gpu_is_refused_with_where_the_list_came_from() -> None:
    order = resolve(gpu_pod(gpus=2), team_default=("cpu-a",), defaults=DEFAULTS, pool_names=POOLS)
    why = refusal(gpu_pod(gpus=2), order, gpu_pools={"gpu-a", "gpu-b"})
    assert why is not None
    assert "asks for 2 GPUs" in why and "its team's defaultNodePools (cpu-a)" in why


@pytest.mark.parametrize(
    ("the_pod", "order"),
    [
        (gpu_pod(gpus=1), PoolOrder(("cpu-a", "gpu-a"), "cluster-gpu")),
        (pod(), PoolOrder(("cpu-a",), "cluster-cpu")),
        (gpu_pod(gpus=1, pools=["cpu-a"]), PoolOrder(("cpu-a",), "annotation")),
        (gpu_pod(gpus=1), PoolOrder(None, "weight")),
    ],
    ids=["one-gpu-pool-in-the-list", "cpu-pod", "own-annotation-left-to-per-pool-reasons", "every-pool"],
)
def test_no_refusal_while_the_list_can_serve_the_pod(the_pod: Pod, order: PoolOrder) -> None:
    assert refusal(the_pod, order, gpu_pools={"gpu-a"}) is None


def _pools() -> list[NodePool]:
    no_gpu = [req(wk.GPU_COUNT, "DoesNotExist")]
    gpu_taint = [{"key": wk.GPU_RESOURCE, "effect": "NoSchedule"}]
    return [
        node_pool("cpu-a", weight=100, requirements=no_gpu),
        node_pool("cpu-b", weight=1, requirements=no_gpu),
        node_pool("gpu-a", weight=100, requirements=[req(wk.GPU_NAME, "In", "h100")], taints=gpu_taint),
        node_pool("gpu-b", weight=1, requirements=[req(wk.GPU_NAME, "In", "l4")], taints=gpu_taint),
    ]


TYPES = {name: cpu_types() + gpu_types() for name in ("cpu-a", "cpu-b", "gpu-a", "gpu-b")}


def test_the_solver_sends_pods_naming_no_list_to_the_cluster_defaults_against_the_weights() -> None:
    options = SolveOptions(pool_defaults=ClusterDefaults(cpu=("cpu-b",), gpu=("gpu-b",)))
    results = run([pod("web"), gpu_pod("infer", gpus=1, gpu_name=None)], _pools(), TYPES, options=options)
    assert {c.pods[0].name: c.nodepool.name for c in results.new_claims} == {"web": "cpu-b", "infer": "gpu-b"}
    plain = run([pod("web"), gpu_pod("infer", gpus=1, gpu_name=None)], _pools(), TYPES)
    assert {c.pods[0].name: c.nodepool.name for c in plain.new_claims} == {"web": "cpu-a", "infer": "gpu-a"}


def test_the_solver_refuses_a_gpu_pod_its_default_list_cannot_serve_and_explain_says_the_same() -> None:
    options = SolveOptions(pool_defaults=ClusterDefaults(gpu=("cpu-a", "cpu-b")))
    the_pod = gpu_pod("train", gpus=1, gpu_name=None)
    results = run([the_pod], _pools(), TYPES, options=options)
    assert not results.new_claims
    (refused,) = results.unschedulable
    assert [r.nodepool for r in refused.reasons] == ["cpu-a", "cpu-b"]
    assert all("cluster's default GPU pools" in r.reason for r in refused.reasons)
    verdicts = explain(
        the_pod, Snapshot(), pools=_pools(), instance_types=TYPES, defaults=options.pool_defaults
    )
    assert [(v.nodepool, v.fits, v.reason) for v in verdicts] == [
        (r.nodepool, False, r.reason) for r in refused.reasons
    ]


# --- a pool list against capacity that exists ---------------------------------------------------------

LISTED = ("first", "second", "third")


def _three(*, first_limit: str | None = None) -> list[NodePool]:
    return [
        node_pool("first", weight=1, limits={"cpu": first_limit} if first_limit else None),
        node_pool("second", weight=1),
        node_pool("third", weight=100),
    ]


def _free_node_in(pool: str) -> Snapshot:
    return snapshot([(node(f"{pool}-node", cpu=8, memory_gib=32, pool=pool), [])])


def test_a_pod_with_a_list_launches_in_its_first_pool_rather_than_take_a_free_node_of_its_third() -> None:
    results = run([pod("p", pools=LISTED)], _three(), snap=_free_node_in("third"))
    assert not results.placements
    assert [c.nodepool.name for c in results.new_claims] == ["first"]


def test_a_pod_with_a_list_takes_the_free_node_of_its_third_pool_when_the_first_two_cannot_launch() -> None:
    pools = _three(first_limit="0")
    types = {"first": cpu_types(), "second": [], "third": cpu_types()}
    results = run([pod("p", pools=LISTED)], pools, types, snap=_free_node_in("third"))
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "third-node")]
    assert not results.new_claims


def test_a_pod_with_a_list_takes_a_free_node_of_its_first_pool_before_launching() -> None:
    results = run([pod("p", pools=LISTED)], _three(), snap=_free_node_in("first"))
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "first-node")]


def test_a_pod_without_a_list_takes_free_capacity_anywhere_first_as_karpenter_does() -> None:
    results = run([pod("p")], _three(), snap=_free_node_in("second"))
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "second-node")]


def test_a_node_opened_in_this_solve_in_a_lower_pool_does_not_pull_a_pod_from_its_first_pool() -> None:
    big = pod("big", cpu="1", pools=["third"])
    small = pod("small", cpu="500m", pools=LISTED)
    results = run([big, small], _three())
    assert {c.nodepool.name: [p.name for p in c.pods] for c in results.new_claims} == {
        "third": ["big"],
        "first": ["small"],
    }


def test_an_untyped_gpu_pod_does_not_grow_an_open_a100_node_when_a_t4_node_of_its_own_is_cheaper() -> None:
    gpu_taint = [{"key": wk.GPU_RESOURCE, "effect": "NoSchedule"}]
    pools = [
        node_pool("t4", weight=60, requirements=[req(wk.GPU_NAME, "In", "t4")], taints=gpu_taint),
        node_pool("a100", weight=50, requirements=[req(wk.GPU_NAME, "In", "a100")], taints=gpu_taint),
    ]
    types = [
        instance_type("g.t4x1", cpu=4, memory_gib=16, gpus=1, gpu_name="t4", price=0.5),
        instance_type("p.a100x1", cpu=12, memory_gib=85, gpus=1, gpu_name="a100", price=3.0),
        instance_type("p.a100x2", cpu=24, memory_gib=170, gpus=2, gpu_name="a100", price=6.0),
    ]
    a100_job = gpu_pod("finetune", gpus=1, gpu_name="a100", cpu="8", memory="32Gi")
    notebook = gpu_pod("notebook", gpus=1, gpu_name=None, cpu="1", memory="4Gi")
    results = run([a100_job, notebook], pools, types)
    placed = {p.name: (c.nodepool.name, c.instance_type.name) for c in results.new_claims for p in c.pods}
    assert placed == {"finetune": ("a100", "p.a100x1"), "notebook": ("t4", "g.t4x1")}


def _default_and_gpu_pools(*, opted_out: bool) -> list[NodePool]:
    default = node_pool("default")
    if opted_out:
        default.metadata.annotations[wk.DEFAULT_POOL] = "false"
    return [default, node_pool("gpu", weight=20, requirements=[req(wk.GPU_NAME, "In", "a100", "h100")])]


@pytest.mark.parametrize(
    ("opted_out", "pool"), [(False, "default"), (True, "gpu")], ids=["named", "opted-out"]
)
def test_a_pool_named_default_takes_unlisted_pods_unless_annotated_out(opted_out: bool, pool: str) -> None:
    pools = _default_and_gpu_pools(opted_out=opted_out)
    types = {"default": cpu_types() + gpu_types(), "gpu": gpu_types()}
    results = run([gpu_pod("train", gpus=4, gpu_name=None)], pools, types)
    assert [c.nodepool.name for c in results.new_claims] == [pool]
