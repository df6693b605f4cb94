"""`explain`: one pod against each pool it may use, in the order the scheduler tries them."""

from __future__ import annotations

from provisioner.api import labels as wk
from provisioner.api.nodepool import NodePool
from provisioner.cloudprovider.types import InstanceType
from provisioner.scheduling import explain
from testkit.builders import cpu_types, gpu_pod, gpu_types, node_pool, pod, req, snapshot
from testkit.typed import present


def pools_and_types() -> tuple[list[NodePool], dict[str, list[InstanceType]]]:
    pools = [
        node_pool("gpu", weight=50, taints=[{"key": wk.GPU_RESOURCE, "effect": "NoSchedule"}]),
        node_pool("cpu", weight=10),
        node_pool("capped", limits={"cpu": "1"}),
    ]
    return pools, {"gpu": gpu_types(), "cpu": cpu_types(), "capped": cpu_types()}


def test_each_pool_in_order_with_its_verdict_and_price() -> None:
    pools, types = pools_and_types()
    verdicts = explain(pod("p", cpu="1"), snapshot(), pools=pools, instance_types=types)
    assert [v.nodepool for v in verdicts] == ["gpu", "cpu", "capped"]
    gpu, cpu, capped = verdicts
    assert not gpu.fits and "taint nvidia.com/gpu:NoSchedule" in gpu.reason
    assert cpu.fits and present(cpu.instance_type).name == "m.large" and cpu.price == 0.04
    assert not capped.fits and capped.reason.startswith("limit cpu=1 would be exceeded")


def test_pool_list_annotation_decides_the_order() -> None:
    pools, types = pools_and_types()
    verdicts = explain(
        pod("p", pools=["capped", "ghost", "cpu"]), snapshot(), pools=pools, instance_types=types
    )
    assert [v.nodepool for v in verdicts] == ["capped", "ghost", "cpu"]
    assert verdicts[1].reason == "NodePool ghost does not exist"


def test_fits_only_after_relaxing_preferences_is_flagged() -> None:
    pools, types = pools_and_types()
    p = pod("p", preferred=[(10, [req(wk.INSTANCE_TYPE, "In", "nonexistent")])])
    cpu = next(v for v in explain(p, snapshot(), pools=pools, instance_types=types) if v.nodepool == "cpu")
    assert cpu.fits and cpu.relaxed


def test_gpu_pod_reports_the_gpu_node_it_would_get() -> None:
    pools, types = pools_and_types()
    gpu = explain(gpu_pod("g", gpus=4, gpu_name="l4"), snapshot(), pools=pools, instance_types=types)[0]
    assert gpu.fits and present(gpu.instance_type).name == "g.l4x4"
