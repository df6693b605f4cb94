"""GPU node health as Run:ai shows it (`state.gpu_health`, in `report nodes`): the GPU operator's
container toolkit and DCGM exporter missing, GPU feature discovery's labels, fewer GPUs or MIG slices than
the instance type has, a MIG layout pending or failed."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.api import mig
from provisioner.cloudprovider import catalog
from provisioner.cloudprovider.types import InstanceType, with_mig_layout
from provisioner.finops.reports import nodes as node_report
from provisioner.state import gpu_health
from provisioner.state.cluster import Snapshot
from testkit.builders import daemonset, pod, state_node

OPERATOR = (gpu_health.TOOLKIT, gpu_health.DCGM_EXPORTER)


def aws(name: str) -> InstanceType:
    return next(t for t in catalog.load("aws") if t.name == name)


def p5_mig(layout: str = "all-1g.10gb") -> InstanceType:
    parted = with_mig_layout(aws("p5.48xlarge"), layout)
    assert not isinstance(parted, str)
    return parted


def operator_pods(*names: str) -> list[Any]:
    return [pod(f"{n}-x", owner="DaemonSet", owner_name=n, namespace="gpu-operator") for n in names]


def report(node: Any, *, operator: tuple[str, ...] = OPERATOR) -> node_report.NodeRow:
    snap = Snapshot(nodes=(node,), daemonsets=tuple(daemonset(n) for n in operator))
    (row,) = node_report.node_rows(snap)
    return row


def test_a_gpu_node_with_the_operators_pods_and_its_gpus_is_ready() -> None:
    row = report(state_node("g", it=aws("p5.48xlarge"), pods=operator_pods(*OPERATOR)))
    assert (row.status, row.reasons, row.gpus) == ("Ready", (), 8)


@pytest.mark.parametrize(
    ("running", "reasons"),
    [
        ((gpu_health.DCGM_EXPORTER,), ("Missing Nvidia Container Toolkit",)),
        ((gpu_health.TOOLKIT,), ("Missing Nvidia DCGM Exporter",)),
        ((), ("Missing Nvidia Container Toolkit", "Missing Nvidia DCGM Exporter")),
    ],
    ids=["toolkit", "dcgm-exporter", "both"],
)
def test_the_gpu_operators_missing_pods_are_named(running: tuple[str, ...], reasons: tuple[str, ...]) -> None:
    row = report(state_node("g", it=aws("p5.48xlarge"), pods=operator_pods(*running)))
    assert row.status == "Not ready"
    assert row.reasons == reasons


def test_without_the_gpu_operator_its_pods_are_not_asked_for() -> None:
    row = report(state_node("g", it=aws("p5.48xlarge")), operator=())
    assert row.reasons == ()


def test_a_cpu_node_has_no_gpu_reasons() -> None:
    assert report(state_node("c", it=aws("m7i.large"))).reasons == ()


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        (
            {gpu_health.GPU_PRESENT: "false"},
            "GPU feature discovery found no GPU (nvidia.com/gpu.present=false)",
        ),
        (
            {gpu_health.GPU_PRODUCT: "NVIDIA-A100-SXM4-40GB"},
            "GPU product NVIDIA-A100-SXM4-40GB is not the h100 its instance type has",
        ),
    ],
    ids=["gpu-absent", "other-product"],
)
def test_gpu_feature_discovery_labels_that_disagree_are_reasons(labels: dict[str, str], reason: str) -> None:
    row = report(state_node("g", it=aws("p5.48xlarge"), pods=operator_pods(*OPERATOR), labels=labels))
    assert row.reasons == (reason,)


def test_fewer_gpus_than_the_type_has_is_a_reason() -> None:
    it = aws("p5.48xlarge")
    fewer = InstanceType(
        name=it.name,
        capacity={**it.capacity, "nvidia.com/gpu": 7},
        overhead=it.overhead,
        offerings=it.offerings,
        labels=it.labels,
        gpu=it.gpu,
    )
    row = report(state_node("g", it=fewer, pods=operator_pods(*OPERATOR)))
    assert row.reasons == ("GPUs fewer than the instance type has (7 of 8 allocatable)",)


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        ("pending", "MIG layout all-1g.10gb pending"),
        ("rebooting", "MIG layout all-1g.10gb pending"),
        ("failed", "MIG layout all-1g.10gb failed"),
    ],
)
def test_a_mig_layout_not_applied_is_a_reason(state: str, reason: str) -> None:
    node = state_node("g", it=p5_mig(), pods=operator_pods(*OPERATOR), labels={mig.MIG_STATE_LABEL: state})
    assert report(node).reasons == (reason,)


def test_an_applied_layout_counts_its_slices() -> None:
    node = state_node(
        "g",
        it=p5_mig(),
        pods=[*operator_pods(*OPERATOR), pod("small", extra_requests={"nvidia.com/mig-1g.10gb": "3"})],
        labels={mig.MIG_STATE_LABEL: "success"},
    )
    row = report(node)
    assert (row.status, row.gpu_name, row.gpus, row.gpus_allocated) == ("Ready", "h100 all-1g.10gb", 56, 3)
    text = node_report.render_nodes([row], fmt="csv")
    assert ",h100 all-1g.10gb,56,3," in text.splitlines()[1]


def test_amd_and_neuron_nodes_count_their_devices_and_need_no_nvidia_operator() -> None:
    trn = report(state_node("t", it=aws("trn1.32xlarge")))
    amd = report(state_node("a", it=aws("g4ad.8xlarge")))
    assert (trn.status, trn.gpus, amd.status, amd.gpus) == ("Ready", 16, "Ready", 2)


def test_a_neuron_node_without_its_devices_names_the_neuron_device_plugin() -> None:
    it = aws("trn1.32xlarge")
    bare = InstanceType(
        name=it.name,
        capacity={k: v for k, v in it.capacity.items() if "/" not in k},
        overhead=it.overhead,
        offerings=it.offerings,
        labels=it.labels,
        gpu=it.gpu,
    )
    assert report(state_node("t", it=bare)).reasons == ("Neuron device plugin missing",)
